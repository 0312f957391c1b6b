/*
 * request.c - JSON (or GET parameters) to a validated attention request.
 *
 * Order matters: options first (text inputs need seed, d_model and the
 * tokenizer options), then inputs, then what depends on their shapes
 * (masks, parameters), and last the core's own resolution of the config,
 * so that every refusal points at the field the client wrote.
 */
#include "request.h"
#include "jsonin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_D_MODEL 64

/* Every top-level field of the JSON form, with how a GET parameter of the
 * same name is read. */
enum option_kind {
    OPT_STRING,
    OPT_INT,
    OPT_NUMBER,
    OPT_BOOL,
    OPT_U64,
    OPT_LIST,
    OPT_JSON_ONLY
};
static const struct {
    const char *name;
    enum option_kind kind;
} options[] = {
    {"sentence", OPT_STRING},
    {"tokens", OPT_JSON_ONLY},
    {"embeddings", OPT_JSON_ONLY},
    {"context", OPT_STRING},
    {"mode", OPT_STRING},
    {"heads", OPT_INT},
    {"kv_heads", OPT_INT},
    {"d_model", OPT_INT},
    {"d_k", OPT_INT},
    {"d_v", OPT_INT},
    {"d_out", OPT_INT},
    {"bias", OPT_BOOL},
    {"out_proj", OPT_BOOL},
    {"out_bias", OPT_BOOL},
    {"scale", OPT_NUMBER},
    {"residual", OPT_STRING},
    {"mask", OPT_STRING},
    {"key_padding", OPT_JSON_ONLY},
    {"positional", OPT_STRING},
    {"dropout", OPT_NUMBER},
    {"seed", OPT_U64},
    {"lowercase", OPT_BOOL},
    {"special_tokens", OPT_BOOL},
    {"params", OPT_JSON_ONLY},
    {"return", OPT_LIST},
    {"precision", OPT_INT},
};
enum { N_OPTIONS = sizeof options / sizeof options[0] };

/* Query parameters that shape a PNG answer, not the computation. */
static const char *const png_params[] = {"format",   "head", "batch",
                                         "colormap", "cell", "labels"};

static const char *const return_names[] = {
    "weights", "scores",       "q",          "k",     "v", "heads_output",
    "output",  "mean_weights", "embeddings", "params"};
static const unsigned return_bits[] = {ATTN_WANT_WEIGHTS,
                                       ATTN_WANT_SCORES,
                                       ATTN_WANT_Q,
                                       ATTN_WANT_K,
                                       ATTN_WANT_V,
                                       ATTN_WANT_HEADS,
                                       ATTN_WANT_OUTPUT,
                                       ATTN_WANT_MEAN_WEIGHTS,
                                       0,
                                       0};

void request_init(struct request *req)
{
    memset(req, 0, sizeof *req);
    req->lowercase = true;
    req->mask_name = "none";
    req->png.labels = true;
}

static void input_free(struct request_input *in)
{
    attn_tokens_free(&in->tokens);
    free(in->x);
    memset(in, 0, sizeof *in);
}

void request_free(struct request *req)
{
    input_free(&req->input);
    input_free(&req->context);
    if (req->explicit_params) {
        float **slots[] = {&req->params.wq, &req->params.bq, &req->params.wk,
                           &req->params.bk, &req->params.wv, &req->params.bv,
                           &req->params.wo, &req->params.bo};
        for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
            free(*slots[i]);
    } else {
        attn_params_free(&req->params);
    }
    free(req->mask);
    free(req->key_padding);
    memset(req, 0, sizeof *req);
}

/* ----------------------------------------------------------- options */

static const cJSON *field(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static bool read_size_option(const cJSON *root, const char *key, size_t hi,
                             size_t *out, struct problem *pb)
{
    const cJSON *v = field(root, key);
    if (!v)
        return true;
    struct jpath at;
    jpath_root(&at, key);
    return jsonin_size(v, &at, 1, hi, out, pb);
}

static bool read_bool_option(const cJSON *root, const char *key, bool *out,
                             struct problem *pb)
{
    const cJSON *v = field(root, key);
    if (!v)
        return true;
    struct jpath at;
    jpath_root(&at, key);
    return jsonin_bool(v, &at, out, pb);
}

static bool read_enum_option(const cJSON *root, const char *key,
                             const char *const *names, size_t n, int *out,
                             struct problem *pb)
{
    const cJSON *v = field(root, key);
    if (!v)
        return true;
    struct jpath at;
    jpath_root(&at, key);
    return jsonin_enum(v, &at, names, n, out, pb);
}

static bool read_return(struct request *req, const cJSON *v, struct problem *pb)
{
    struct jpath at;
    jpath_root(&at, "return");
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, at.pointer,
                           "return is %s; expected an array of names such as "
                           "[\"weights\", \"output\"]",
                           jsonin_kind(v));
    req->cfg.want = 0;
    req->extra = 0;
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        struct jpath sub;
        jpath_index(&sub, &at, i++);
        int which;
        if (!jsonin_enum(item, &sub, return_names,
                         sizeof return_names / sizeof return_names[0], &which,
                         pb))
            return false;
        req->cfg.want |= return_bits[which];
        if (!strcmp(return_names[which], "embeddings"))
            req->extra |= REQUEST_WANT_EMBEDDINGS;
        else if (!strcmp(return_names[which], "params"))
            req->extra |= REQUEST_WANT_PARAMS;
    }
    return true;
}

static bool read_options(struct request *req, const cJSON *root,
                         const struct request_limits *lim, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    static const char *const modes[] = {"projected", "basic"};
    static const char *const residuals[] = {"none", "value", "input"};
    static const char *const positionals[] = {"none", "sinusoidal", "rope"};
    int mode = 0, residual = 0, positional = 0;
    bool out_proj = true;
    if (!read_enum_option(root, "mode", modes, 2, &mode, pb) ||
        !read_size_option(root, "heads", lim->max_heads, &c->heads, pb) ||
        !read_size_option(root, "kv_heads", lim->max_heads, &c->kv_heads, pb) ||
        !read_size_option(root, "d_model", lim->max_dim, &c->d_model, pb) ||
        !read_size_option(root, "d_k", lim->max_dim, &c->d_k, pb) ||
        !read_size_option(root, "d_v", lim->max_dim, &c->d_v, pb) ||
        !read_size_option(root, "d_out", lim->max_dim, &c->d_out, pb) ||
        !read_bool_option(root, "bias", &req->bias, pb) ||
        !read_bool_option(root, "out_proj", &out_proj, pb) ||
        !read_enum_option(root, "residual", residuals, 3, &residual, pb) ||
        !read_enum_option(root, "positional", positionals, 3, &positional,
                          pb) ||
        !read_bool_option(root, "lowercase", &req->lowercase, pb) ||
        !read_bool_option(root, "special_tokens", &req->special_tokens, pb))
        return false;
    c->mode = mode ? ATTN_MODE_BASIC : ATTN_MODE_PROJECTED;
    c->residual = (attn_residual)residual;
    c->positional = (attn_positional)positional;
    c->no_out_proj = !out_proj;
    c->qkv_bias = c->out_bias = req->bias;
    /* out_bias alone: ViT's qkv_bias=False with a biased projection */
    if (!read_bool_option(root, "out_bias", &c->out_bias, pb))
        return false;
    if (mode == 1 && !field(root, "heads"))
        c->heads = 1; /* the server's default of 8 heads is for projected */
    else if (!c->heads)
        c->heads = 8;

    const cJSON *v;
    struct jpath at;
    if ((v = field(root, "scale"))) {
        jpath_root(&at, "scale");
        if (!jsonin_float(v, &at, &c->scale, pb))
            return false;
        c->has_scale = true;
    }
    if ((v = field(root, "dropout"))) {
        jpath_root(&at, "dropout");
        if (!jsonin_float(v, &at, &c->dropout, pb))
            return false;
        if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
            return problem_set(pb, 422, at.pointer,
                               "dropout (%.9g) must be at least 0 and below 1",
                               (double)c->dropout);
    }
    if ((v = field(root, "seed"))) {
        jpath_root(&at, "seed");
        if (!jsonin_u64(v, &at, &c->seed, pb))
            return false;
    }
    if ((v = field(root, "precision"))) {
        size_t p;
        jpath_root(&at, "precision");
        if (!jsonin_size(v, &at, 1, 9, &p, pb))
            return false;
        req->precision = (int)p;
    }
    c->want = ATTN_WANT_WEIGHTS;
    if ((v = field(root, "return")) && !read_return(req, v, pb))
        return false;
    return true;
}

/* ------------------------------------------------------------- inputs */

/* Append s to a token block being filled; *next is where its bytes go. */
static void tokens_push(struct attn_tokens *tokens, char **next, const char *s)
{
    const size_t n = strlen(s) + 1;
    memcpy(*next, s, n);
    tokens->text[tokens->count++] = *next;
    *next += n;
}

/* Tokens of a text input, from "sentence" or "tokens". */
static bool read_text(struct request *req, struct request_input *in,
                      const cJSON *sentence, const cJSON *tokens,
                      const struct jpath *at, const struct request_limits *lim,
                      struct problem *pb)
{
    const struct attn_tokenize_options opts = {
        .keep_case = !req->lowercase, .special_tokens = req->special_tokens};
    if (sentence) {
        if (!cJSON_IsString(sentence))
            return problem_set(pb, 422, at->pointer,
                               "%s is %s; expected a string", at->name,
                               jsonin_kind(sentence));
        struct attn_error err;
        const attn_status st =
            attn_tokenize(sentence->valuestring, strlen(sentence->valuestring),
                          &opts, lim->max_tokens, &in->tokens, &err);
        if (st == ATTN_E_TOO_BIG)
            return problem_set(pb, 422, at->pointer,
                               "%s has more than %zu tokens (--max-tokens)",
                               at->name, lim->max_tokens);
        if (st != ATTN_OK) {
            /* name the client's field, keep the core's position */
            const char *why = strstr(err.message, " at byte");
            return problem_set(pb, st == ATTN_E_NOMEM ? 503 : 422, at->pointer,
                               "%s has invalid UTF-8%s", at->name,
                               why ? why : "");
        }
        if (in->tokens.count == 0)
            return problem_set(pb, 422, at->pointer,
                               "%s has no tokens (it is empty or only "
                               "whitespace and control characters)",
                               at->name);
        return true;
    }
    /* "tokens": taken as given, one embedding per string */
    if (!cJSON_IsArray(tokens))
        return problem_set(pb, 422, at->pointer,
                           "%s is %s; expected an array of strings", at->name,
                           jsonin_kind(tokens));
    const size_t given = (size_t)cJSON_GetArraySize(tokens);
    const size_t extra = req->special_tokens ? 2 : 0;
    if (given == 0)
        return problem_set(pb, 422, at->pointer, "%s is empty", at->name);
    if (given + extra > lim->max_tokens)
        return problem_set(pb, 422, at->pointer,
                           "%s has %zu tokens; the limit is %zu (--max-tokens)",
                           at->name, given + extra, lim->max_tokens);
    /* Checked and measured first, then copied into one block, the
     * pointers then the bytes, laid out as attn_tokenize() lays out its
     * result: attn_tokens_free() releases the block, not each string. */
    size_t i = 0, bytes = extra ? sizeof "[CLS]" + sizeof "[SEP]" : 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens)
    {
        struct jpath sub;
        jpath_index(&sub, at, i++);
        if (!cJSON_IsString(t))
            return problem_set(pb, 422, sub.pointer,
                               "%s is %s; expected a string", sub.name,
                               jsonin_kind(t));
        if (!t->valuestring[0])
            return problem_set(pb, 422, sub.pointer, "%s is an empty string",
                               sub.name);
        /* the tokenizer's UTF-8 check, on one token */
        struct attn_tokens probe;
        struct attn_error err;
        const struct attn_tokenize_options keep = {.keep_case = true};
        if (attn_tokenize(t->valuestring, strlen(t->valuestring), &keep, 0,
                          &probe, &err) == ATTN_E_INPUT)
            return problem_set(pb, 422, sub.pointer, "%s has invalid UTF-8%s",
                               sub.name,
                               strstr(err.message, " at byte")
                                   ? strstr(err.message, " at byte")
                                   : "");
        attn_tokens_free(&probe);
        bytes += strlen(t->valuestring) + 1;
    }
    const size_t count = given + extra;
    char **block = malloc(count * sizeof *block + bytes);
    if (!block)
        return problem_set(pb, 503, at->pointer, "out of memory");
    in->tokens.text = block;
    char *next = (char *)(block + count);
    if (extra)
        tokens_push(&in->tokens, &next, "[CLS]");
    cJSON_ArrayForEach(t, tokens)
        tokens_push(&in->tokens, &next, t->valuestring);
    if (extra)
        tokens_push(&in->tokens, &next, "[SEP]");
    return true;
}

/* One of sentence / tokens / embeddings from obj into in. */
static bool read_input(struct request *req, struct request_input *in,
                       const cJSON *obj, const struct jpath *base,
                       const char *what, const struct request_limits *lim,
                       struct problem *pb)
{
    static const char *const kinds[] = {"sentence", "tokens", "embeddings"};
    const cJSON *found[3] = {NULL, NULL, NULL};
    int n_found = 0, which = -1;
    for (int i = 0; i < 3; i++)
        if ((found[i] = field(obj, kinds[i]))) {
            n_found++;
            if (which < 0)
                which = i;
        }
    if (n_found == 0)
        return problem_set(pb, 422, base ? base->pointer : "",
                           "%s needs one of \"sentence\", \"tokens\" or "
                           "\"embeddings\"",
                           what);
    if (n_found > 1)
        return problem_set(pb, 422, base ? base->pointer : "",
                           "%s has more than one of \"sentence\", \"tokens\" "
                           "and \"embeddings\"; send exactly one",
                           what);
    struct jpath at;
    jpath_key(&at, base, kinds[which]);
    in->present = true;
    in->pointer = which == 0   ? (base ? "/context/sentence" : "/sentence")
                  : which == 1 ? (base ? "/context/tokens" : "/tokens")
                               : (base ? "/context/embeddings" : "/embeddings");
    if (which == 2) {
        size_t dims[3];
        int rank;
        if (!jsonin_tensor(found[2], &at, 0, lim->max_output, &in->x, dims,
                           &rank, pb))
            return false;
        in->batched = rank == 3;
        in->batch = rank == 3 ? dims[0] : 1;
        in->n = rank == 3 ? dims[1] : dims[0];
        in->d = rank == 3 ? dims[2] : dims[1];
        if (in->n > lim->max_tokens)
            return problem_set(pb, 422, at.pointer,
                               "%s has %zu tokens; the limit is %zu "
                               "(--max-tokens)",
                               at.name, in->n, lim->max_tokens);
        if (in->d > lim->max_dim)
            return problem_set(pb, 422, at.pointer,
                               "%s rows have %zu numbers; the limit is %zu "
                               "(--max-dim)",
                               at.name, in->d, lim->max_dim);
        return true;
    }
    in->from_text = true;
    if (!read_text(req, in, found[0], found[1], &at, lim, pb))
        return false;
    in->batch = 1;
    in->n = in->tokens.count;
    /* a text context is embedded as wide as the input it is attended from */
    in->d = in != &req->input  ? req->input.d
            : req->cfg.d_model ? req->cfg.d_model
                               : DEFAULT_D_MODEL;
    size_t count;
    if (__builtin_mul_overflow(in->n, in->d, &count) || count > lim->max_output)
        return problem_set(pb, 422, at.pointer,
                           "%zu tokens of width %zu are more numbers than the "
                           "limit (%zu, --max-output)",
                           in->n, in->d, lim->max_output);
    in->x = malloc(count * sizeof *in->x);
    if (!in->x)
        return problem_set(pb, 503, at.pointer, "out of memory");
    for (size_t t = 0; t < in->n; t++)
        attn_embed_token(in->tokens.text[t], strlen(in->tokens.text[t]),
                         req->cfg.seed, in->d, in->x + t * in->d);
    return true;
}

static bool read_inputs(struct request *req, const cJSON *root,
                        const struct request_limits *lim, struct problem *pb)
{
    if (!read_input(req, &req->input, root, NULL, "the request", lim, pb))
        return false;
    struct request_input *x = &req->input;
    if (!x->from_text && req->cfg.d_model && req->cfg.d_model != x->d)
        return problem_set(pb, 422, "/d_model",
                           "d_model (%zu) does not match the embeddings' "
                           "width (%zu)",
                           req->cfg.d_model, x->d);
    const cJSON *ctx = field(root, "context");
    if (!ctx)
        return true;
    struct jpath at;
    jpath_root(&at, "context");
    if (!cJSON_IsObject(ctx))
        return problem_set(pb, 422, at.pointer,
                           "context is %s; expected an object such as "
                           "{\"sentence\": \"...\"}",
                           jsonin_kind(ctx));
    const cJSON *k;
    cJSON_ArrayForEach(k, ctx)
    {
        if (strcmp(k->string, "sentence") && strcmp(k->string, "tokens") &&
            strcmp(k->string, "embeddings")) {
            struct jpath bad;
            jpath_key(&bad, &at, k->string);
            return problem_set(pb, 422, bad.pointer,
                               "unknown field \"%.40s\" in context; expected "
                               "\"sentence\", \"tokens\" or \"embeddings\"",
                               k->string);
        }
    }
    if (!read_input(req, &req->context, ctx, &at, "context", lim, pb))
        return false;
    const struct request_input *c = &req->context;
    if (c->batched && x->batch != c->batch)
        return problem_set(pb, 422, c->pointer,
                           "context has a batch of %zu; the input has %zu",
                           c->batch, x->batch);
    if (!c->batched && x->batch > 1) {
        /* one context for every sequence: repeat it */
        float *wide = malloc(x->batch * c->n * c->d * sizeof *wide);
        if (!wide)
            return problem_set(pb, 503, c->pointer, "out of memory");
        for (size_t b = 0; b < x->batch; b++)
            memcpy(wide + b * c->n * c->d, c->x, c->n * c->d * sizeof *wide);
        free(req->context.x);
        req->context.x = wide;
        req->context.batch = x->batch;
    }
    return true;
}

/* -------------------------------------------------------------- masks */

static bool read_mask(struct request *req, const cJSON *root,
                      struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    const cJSON *v = field(root, "mask");
    struct jpath at;
    jpath_root(&at, "mask");
    if (v && cJSON_IsString(v)) {
        static const char *const kinds[] = {"none", "causal"};
        int which;
        if (!jsonin_enum(v, &at, kinds, 2, &which, pb))
            return false;
        c->causal = which == 1;
        req->mask_name = kinds[which];
    } else if (v) {
        size_t dims[3];
        int rank;
        if (!cJSON_IsArray(v))
            return problem_set(pb, 422, at.pointer,
                               "mask is %s; expected \"none\", \"causal\" or "
                               "an array of booleans",
                               jsonin_kind(v));
        if (!jsonin_bool_tensor(v, &at, 0, SIZE_MAX / 4, &req->mask, dims,
                                &rank, pb))
            return false;
        const size_t n = c->n_query, m = c->n_ctx, b = c->batch;
        const size_t want_rows = rank == 3 ? dims[1] : dims[0];
        const size_t want_cols = rank == 3 ? dims[2] : dims[1];
        if (rank == 3 && dims[0] != b)
            return problem_set(pb, 422, at.pointer,
                               "mask has a batch of %zu; the input has %zu",
                               dims[0], b);
        if (want_rows != n || want_cols != m)
            return problem_set(pb, 422, at.pointer,
                               "mask is %zu x %zu; expected %zu x %zu (query "
                               "tokens x %s tokens)",
                               want_rows, want_cols, n, m,
                               c->cross ? "context" : "key");
        c->mask = req->mask;
        c->mask_batched = rank == 3;
        req->mask_name = "explicit";
    }
    if ((v = field(root, "key_padding"))) {
        jpath_root(&at, "key_padding");
        size_t dims[3];
        int rank;
        if (!cJSON_IsArray(v))
            return problem_set(pb, 422, at.pointer,
                               "key_padding is %s; expected an array of "
                               "booleans (true = ignore the key)",
                               jsonin_kind(v));
        const int want_rank = cJSON_IsArray(v->child) ? 2 : 1;
        if (!jsonin_bool_tensor(v, &at, want_rank, SIZE_MAX / 4,
                                &req->key_padding, dims, &rank, pb))
            return false;
        const size_t len = rank == 2 ? dims[1] : dims[0];
        if (rank == 2 && dims[0] != c->batch)
            return problem_set(pb, 422, at.pointer,
                               "key_padding has %zu rows; the batch is %zu",
                               dims[0], c->batch);
        if (len != c->n_ctx)
            return problem_set(pb, 422, at.pointer,
                               "key_padding has %zu entries; expected one per "
                               "key (%zu)",
                               len, c->n_ctx);
        c->key_padding = req->key_padding;
        c->key_padding_batched = rank == 2;
    }
    return true;
}

/* ------------------------------------------------------------- params */

/* Where a params key goes: a tensor slot, and for the fused in_proj
 * tensors which part of it. */
struct param_target {
    float **slot_q, **slot_k, **slot_v; /* fused: split rows among these */
    float **slot;                       /* single */
    bool is_weight;
    const char *name; /* state_dict name for messages */
};

static bool copy_rows(float **dst, const float *src, size_t rows, size_t cols)
{
    *dst = malloc(rows * cols * sizeof **dst);
    if (!*dst)
        return false;
    memcpy(*dst, src, rows * cols * sizeof **dst);
    return true;
}

/* Check one given tensor against the shape the config needs. */
static bool expect_shape(const struct jpath *at, const size_t dims[3], int rank,
                         bool weight, size_t rows, size_t cols,
                         const char *rows_what, struct problem *pb)
{
    if (weight && rank != 2)
        return problem_set(pb, 422, at->pointer,
                           "params %s has %d dimension%s; a weight is "
                           "[out_features][in_features]",
                           at->name, rank, rank == 1 ? "" : "s");
    if (!weight && rank != 1)
        return problem_set(pb, 422, at->pointer,
                           "params %s has %d dimensions; a bias is "
                           "[out_features]",
                           at->name, rank);
    if (dims[0] != rows)
        return problem_set(pb, 422, at->pointer,
                           "params %s has %zu rows; expected %s = %zu",
                           at->name, dims[0], rows_what, rows);
    if (weight && dims[1] != cols)
        return problem_set(pb, 422, at->pointer,
                           "params %s has %zu columns; expected %zu (its "
                           "input width)",
                           at->name, dims[1], cols);
    return true;
}

static bool store_param(struct request *req, const char *key, const cJSON *v,
                        const struct jpath *at, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    struct attn_params *p = &req->params;
    const size_t hk = c->heads * c->d_k, gk = c->kv_heads * c->d_k,
                 gv = c->kv_heads * c->d_v, hv = c->heads * c->d_v;
    const struct {
        const char *key;
        float **slot;
        bool weight;
        size_t rows, cols;
        const char *rows_what;
    } table[] = {
        {"q_proj.weight", &p->wq, true, hk, c->d_model, "heads x d_k"},
        {"q_proj.bias", &p->bq, false, hk, 0, "heads x d_k"},
        {"k_proj.weight", &p->wk, true, gk, c->d_ctx, "kv_heads x d_k"},
        {"k_proj.bias", &p->bk, false, gk, 0, "kv_heads x d_k"},
        {"v_proj.weight", &p->wv, true, gv, c->d_ctx, "kv_heads x d_v"},
        {"v_proj.bias", &p->bv, false, gv, 0, "kv_heads x d_v"},
        {"out_proj.weight", &p->wo, true, c->d_out, hv, "d_out"},
        {"out_proj.bias", &p->bo, false, c->d_out, 0, "d_out"},
        /* nn.MultiheadAttention's separate projections (kdim != embed_dim) */
        {"q_proj_weight", &p->wq, true, hk, c->d_model, "heads x d_k"},
        {"k_proj_weight", &p->wk, true, gk, c->d_ctx, "kv_heads x d_k"},
        {"v_proj_weight", &p->wv, true, gv, c->d_ctx, "kv_heads x d_v"},
    };
    size_t dims[3];
    int rank;
    float *values = NULL;
    /* rank as the client nested it; expect_shape() says what it should be */
    const int nested = cJSON_IsArray(v) && cJSON_IsArray(v->child) ? 2 : 1;
    if (!jsonin_tensor(v, at, nested, SIZE_MAX / 8, &values, dims, &rank, pb))
        return false;
    bool ok = false;
    if (!strcmp(key, "in_proj_weight") || !strcmp(key, "in_proj_bias")) {
        const bool weight = key[8] == 'w';
        if (c->d_ctx != c->d_model) {
            problem_set(pb, 422, at->pointer,
                        "params %s needs the context as wide as the input "
                        "(%zu vs %zu); give q_proj_weight, k_proj_weight and "
                        "v_proj_weight instead",
                        at->name, c->d_ctx, c->d_model);
        } else if (expect_shape(at, dims, rank, weight, hk + gk + gv,
                                c->d_model, "(heads + 2 x kv_heads) x d_head",
                                pb)) {
            const size_t cols = weight ? c->d_model : 1;
            float **q = weight ? &p->wq : &p->bq,
                  **k = weight ? &p->wk : &p->bk,
                  **vv = weight ? &p->wv : &p->bv;
            free(*q);
            free(*k);
            free(*vv);
            *q = *k = *vv = NULL;
            ok = copy_rows(q, values, hk, cols) &&
                 copy_rows(k, values + hk * cols, gk, cols) &&
                 copy_rows(vv, values + (hk + gk) * cols, gv, cols);
            if (!ok)
                problem_set(pb, 503, at->pointer, "out of memory");
        }
        free(values);
        return ok;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(key, table[i].key))
            continue;
        if (!expect_shape(at, dims, rank, table[i].weight, table[i].rows,
                          table[i].cols, table[i].rows_what, pb)) {
            free(values);
            return false;
        }
        free(*table[i].slot);
        *table[i].slot = values;
        return true;
    }
    free(values);
    return problem_set(pb, 422, at->pointer,
                       "unknown parameter \"%.60s\"; expected q_proj, k_proj, "
                       "v_proj and out_proj (weight and bias), or "
                       "in_proj_weight and in_proj_bias",
                       key);
}

static bool read_params(struct request *req, const cJSON *v, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    struct jpath at;
    jpath_root(&at, "params");
    if (!cJSON_IsObject(v))
        return problem_set(pb, 422, at.pointer,
                           "params is %s; expected an object of tensors in "
                           "PyTorch's state_dict layout",
                           jsonin_kind(v));
    if (c->mode == ATTN_MODE_BASIC)
        return problem_set(pb, 422, at.pointer,
                           "params are not used in mode \"basic\"");
    req->explicit_params = true;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        struct jpath sub;
        jpath_key(&sub, &at, item->string);
        if (cJSON_IsObject(item)) {
            /* nested form: {"q_proj": {"weight": ..., "bias": ...}} */
            const cJSON *t;
            cJSON_ArrayForEach(t, item)
            {
                char key[96];
                struct jpath leaf;
                jpath_key(&leaf, &sub, t->string);
                snprintf(key, sizeof key, "%s.%s", item->string, t->string);
                if (!store_param(req, key, t, &leaf, pb))
                    return false;
            }
        } else if (!store_param(req, item->string, item, &sub, pb)) {
            return false;
        }
    }
    const struct {
        float *slot;
        const char *name;
        bool needed;
    } required[] = {
        {req->params.wq, "q_proj.weight", true},
        {req->params.wk, "k_proj.weight", true},
        {req->params.wv, "v_proj.weight", true},
        {req->params.wo, "out_proj.weight", !c->no_out_proj},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (required[i].needed && !required[i].slot)
            return problem_set(pb, 422, at.pointer, "params lacks %s",
                               required[i].name);
    if (c->no_out_proj && (req->params.wo || req->params.bo))
        return problem_set(pb, 422, "/out_proj",
                           "params has out_proj tensors but out_proj is "
                           "false");
    c->qkv_bias = req->params.bq || req->params.bk || req->params.bv;
    c->out_bias = req->params.bo != NULL;
    c->params = &req->params;
    return true;
}

/* ----------------------------------------------------------- assembly */

static bool check_known_fields(const cJSON *root, struct problem *pb)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        bool known = false;
        for (size_t i = 0; i < N_OPTIONS && !known; i++)
            known = !strcmp(item->string, options[i].name);
        if (!known) {
            struct jpath at;
            jpath_root(&at, item->string);
            return problem_set(pb, 422, at.pointer, "unknown field \"%.60s\"",
                               item->string);
        }
    }
    return true;
}

static bool resolve(struct request *req, const struct request_limits *lim,
                    struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    const struct problem_field fields[] = {
        {"mode", "/mode"},
        {"heads", "/heads"},
        {"kv_heads", "/kv_heads"},
        {"d_k", "/d_k"},
        {"d_v", "/d_v"},
        {"d_out", "/d_out"},
        {"d_model", "/d_model"},
        {"scale", "/scale"},
        {"dropout", "/dropout"},
        {"residual", "/residual"},
        {"positional", "/positional"},
        {"return", "/return"},
        {"n_query", req->input.pointer},
        {"context", "/context"},
        {"n_ctx", "/context"},
        {"d_ctx", "/context"},
    };
    c->max_elements = lim->max_output;
    /* The core reads "nothing" as "the output"; "return": [] means
     * tokens and config only, so keep the client's set. */
    const unsigned want = c->want;
    struct attn_error err;
    const attn_status st = attn_config_resolve(c, &err);
    c->want = want;
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, fields,
                                 sizeof fields / sizeof fields[0]);
    return true;
}

static bool decode(struct request *req, const cJSON *root,
                   const struct request_limits *lim, struct problem *pb)
{
    if (!cJSON_IsObject(root))
        return problem_set(pb, 422, "",
                           "the body is %s; expected a JSON object",
                           jsonin_kind(root));
    if (!check_known_fields(root, pb) || !read_options(req, root, lim, pb) ||
        !read_inputs(req, root, lim, pb))
        return false;
    struct attn_config *c = &req->cfg;
    c->batch = req->input.batch;
    c->n_query = req->input.n;
    c->d_model = req->input.d;
    c->cross = req->context.present;
    c->n_ctx = c->cross ? req->context.n : c->n_query;
    c->d_ctx = c->cross ? req->context.d : c->d_model;
    /* sizes first: masks and parameters are checked against them */
    if (!read_mask(req, root, pb) || !resolve(req, lim, pb))
        return false;
    const cJSON *v = field(root, "params");
    if (v && !read_params(req, v, pb))
        return false;
    size_t extra = 0;
    if (req->extra & REQUEST_WANT_EMBEDDINGS)
        extra += c->batch * (c->n_query * c->d_model +
                             (c->cross ? c->n_ctx * c->d_ctx : 0));
    if (req->extra & REQUEST_WANT_PARAMS)
        extra += (c->heads * c->d_k + 1) * (c->d_model + 1) +
                 c->kv_heads * (c->d_k + c->d_v) * (c->d_ctx + 1) +
                 (c->d_out + 1) * (c->heads * c->d_v + 1);
    if (extra > lim->max_output)
        return problem_set(pb, 422, "/return",
                           "the requested arrays hold more than %zu numbers "
                           "(--max-output)",
                           lim->max_output);
    return true;
}

bool request_parse_json(struct request *req, const char *body, size_t len,
                        const struct request_limits *lim, struct problem *pb)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        const size_t offset = end ? (size_t)(end - body) : 0;
        return problem_set(pb, 400, "",
                           "the body is not valid JSON (error at byte %zu of "
                           "%zu)",
                           offset, len);
    }
    /* cJSON stops after the first value; anything but space after it is
     * a second document, which JSON does not allow. */
    for (const char *p = end; p && p < body + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            cJSON_Delete(root);
            return problem_set(pb, 400, "",
                               "the body is not valid JSON (unexpected data "
                               "at byte %zu of %zu)",
                               (size_t)(p - body), len);
        }
    const bool ok = decode(req, root, lim, pb);
    cJSON_Delete(root);
    return ok;
}

/* ------------------------------------------------------- GET parameters */

bool request_is_png_param(const char *key)
{
    for (size_t i = 0; i < sizeof png_params / sizeof png_params[0]; i++)
        if (!strcmp(key, png_params[i]))
            return true;
    return false;
}

/* A query value as the JSON value the same option takes. */
static cJSON *query_value(enum option_kind kind, const char *key,
                          const char *value, struct problem *pb)
{
    char *end = NULL;
    switch (kind) {
    case OPT_STRING:
        if (!strcmp(key, "context")) {
            cJSON *ctx = cJSON_CreateObject();
            if (ctx && !cJSON_AddStringToObject(ctx, "sentence", value)) {
                cJSON_Delete(ctx);
                ctx = NULL;
            }
            return ctx;
        }
        return cJSON_CreateString(value);
    case OPT_INT:
    case OPT_NUMBER: {
        const double d = strtod(value, &end);
        if (!*value || *end) {
            char at[80];
            snprintf(at, sizeof at, "/%.70s", key);
            problem_set(pb, 422, at, "%s (\"%.40s\") must be a number", key,
                        value);
            return NULL;
        }
        return cJSON_CreateNumber(d);
    }
    case OPT_U64: return cJSON_CreateString(value);
    case OPT_BOOL:
        if (!strcmp(value, "true") || !strcmp(value, "1"))
            return cJSON_CreateTrue();
        if (!strcmp(value, "false") || !strcmp(value, "0"))
            return cJSON_CreateFalse();
        {
            char at[80];
            snprintf(at, sizeof at, "/%.70s", key);
            problem_set(pb, 422, at, "%s (\"%.40s\") must be true or false",
                        key, value);
        }
        return NULL;
    case OPT_LIST: {
        cJSON *arr = cJSON_CreateArray();
        const char *p = value;
        while (arr && *p) {
            const char *comma = strchr(p, ',');
            const size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), p);
            if (n && !cJSON_AddItemToArray(arr, cJSON_CreateString(name))) {
                cJSON_Delete(arr);
                return NULL;
            }
            p += n + (comma ? 1 : 0);
        }
        return arr;
    }
    case OPT_JSON_ONLY: break;
    }
    return NULL;
}

bool request_parse_query(struct request *req, const struct request_param *p,
                         size_t n, const struct request_limits *lim,
                         struct problem *pb)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return problem_set(pb, 503, "", "out of memory");
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        if (request_is_png_param(p[i].key))
            continue;
        size_t k = 0;
        while (k < N_OPTIONS && strcmp(options[k].name, p[i].key))
            k++;
        if (k == N_OPTIONS || options[k].kind == OPT_JSON_ONLY) {
            char at[80];
            snprintf(at, sizeof at, "/%.70s", p[i].key);
            ok = problem_set(pb, 422, at,
                             k == N_OPTIONS
                                 ? "unknown query parameter \"%.60s\""
                                 : "query parameter \"%.60s\" is only "
                                   "accepted in a JSON body (POST)",
                             p[i].key);
            break;
        }
        if (cJSON_GetObjectItemCaseSensitive(root, p[i].key)) {
            ok = problem_set(pb, 422, "",
                             "query parameter \"%.60s\" is given twice",
                             p[i].key);
            break;
        }
        problem_set(pb, 503, "", "out of memory");
        cJSON *v = query_value(options[k].kind, p[i].key, p[i].value, pb);
        ok = v && cJSON_AddItemToObject(root, p[i].key, v);
        if (v && !ok)
            cJSON_Delete(v);
    }
    if (ok)
        ok = decode(req, root, lim, pb);
    /* JSON pointers mean little in a URL: point at the parameter name */
    if (!ok && pb->pointer[0] == '/') {
        char *slash = strchr(pb->pointer + 1, '/');
        if (slash)
            *slash = '\0';
    }
    cJSON_Delete(root);
    return ok;
}

/* --------------------------------------------------------------- PNG */

bool request_parse_png(struct request *req, const struct request_param *p,
                       size_t n, bool accept_png, struct problem *pb)
{
    struct request_png *png = &req->png;
    png->wanted = accept_png;
    png->labels = true;
    png->head_kind = HEAD_ALL;
    for (size_t i = 0; i < n; i++) {
        const char *k = p[i].key, *v = p[i].value;
        char pointer[80];
        snprintf(pointer, sizeof pointer, "/%.70s", k);
        if (!strcmp(k, "format")) {
            if (!strcmp(v, "png"))
                png->wanted = true;
            else if (!strcmp(v, "json"))
                png->wanted = false;
            else
                return problem_set(pb, 422, pointer,
                                   "format (\"%.40s\") must be \"json\" or "
                                   "\"png\"",
                                   v);
        } else if (!strcmp(k, "head")) {
            char *end = NULL;
            if (!strcmp(v, "mean")) {
                png->head_kind = HEAD_MEAN;
            } else if (!strcmp(v, "all")) {
                png->head_kind = HEAD_ALL;
            } else {
                const unsigned long h = strtoul(v, &end, 10);
                if (!*v || *end || *v == '-' || *v == '+')
                    return problem_set(pb, 422, pointer,
                                       "head (\"%.40s\") must be a head "
                                       "number from 0, \"mean\" or \"all\"",
                                       v);
                png->head_kind = HEAD_ONE;
                png->head = h;
            }
        } else if (!strcmp(k, "batch")) {
            char *end = NULL;
            png->batch = strtoul(v, &end, 10);
            if (!*v || *end || *v == '-' || *v == '+')
                return problem_set(pb, 422, pointer,
                                   "batch (\"%.40s\") must be a sequence "
                                   "number from 0",
                                   v);
        } else if (!strcmp(k, "colormap")) {
            if (!heatmap_colormap_parse(v, &png->colormap))
                return problem_set(pb, 422, pointer,
                                   "colormap (\"%.40s\") must be \"viridis\", "
                                   "\"magma\" or \"gray\"",
                                   v);
        } else if (!strcmp(k, "cell")) {
            char *end = NULL;
            const unsigned long cell = strtoul(v, &end, 10);
            if (!*v || *end || cell < 1 || cell > 64)
                return problem_set(pb, 422, pointer,
                                   "cell (\"%.40s\") must be a number of "
                                   "pixels from 1 to 64",
                                   v);
            png->cell = (unsigned)cell;
        } else if (!strcmp(k, "labels")) {
            if (!strcmp(v, "true") || !strcmp(v, "1"))
                png->labels = true;
            else if (!strcmp(v, "false") || !strcmp(v, "0"))
                png->labels = false;
            else
                return problem_set(pb, 422, pointer,
                                   "labels (\"%.40s\") must be true or false",
                                   v);
        }
    }
    if (!png->wanted)
        return true;
    const struct attn_config *c = &req->cfg;
    if (png->head_kind == HEAD_ONE && png->head >= c->heads)
        return problem_set(pb, 422, "/head",
                           "head (%zu) is out of range; this configuration "
                           "has %zu head%s (0 to %zu)",
                           png->head, c->heads, c->heads == 1 ? "" : "s",
                           c->heads - 1);
    if (png->batch >= c->batch)
        return problem_set(pb, 422, "/batch",
                           "batch (%zu) is out of range; the input has %zu "
                           "sequence%s",
                           png->batch, c->batch, c->batch == 1 ? "" : "s");
    return true;
}
