/*
 * request_input.c - the sequences a request attends over: "sentence",
 * "tokens" or "embeddings", and the same three inside "context". Text is
 * tokenized and embedded from the seed, as wide as d_model.
 */
#include "checked.h"
#include "jsonin.h"
#include "request_fields.h"
#include "request_steps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tokenizer's refusal of bad UTF-8, in the client's terms: the field
 * as the client named it, at the byte the tokenizer found. */
static bool bad_utf8(const struct jpath *at, const char *text,
                     const struct attn_error *err, struct problem *pb)
{
    if (err->n_index < 1)
        return problem_set(pb, 422, at->pointer, "%s has invalid UTF-8",
                           at->name);
    const size_t byte = err->index[0];
    return problem_set(pb, 422, at->pointer,
                       "%s has invalid UTF-8 at byte %zu (0x%02x)", at->name,
                       byte, (unsigned)(unsigned char)text[byte]);
}

/* Append s to a token block being filled; *next is where its bytes go. */
static void tokens_push(struct attn_tokens *tokens, char **next, const char *s)
{
    const size_t n = strlen(s) + 1;
    memcpy(*next, s, n);
    tokens->text[tokens->count++] = *next;
    *next += n;
}

static bool read_sentence(struct request *req, struct request_input *in,
                          const cJSON *sentence, const struct jpath *at,
                          const struct request_limits *lim, struct problem *pb)
{
    const struct attn_tokenize_options opts = {
        .keep_case = !req->lowercase, .special_tokens = req->special_tokens};
    if (!cJSON_IsString(sentence))
        return problem_set(pb, 422, at->pointer, "%s is %s; expected a string",
                           at->name, jsonin_kind(sentence));
    size_t len;
    const char *text = jsonin_text(sentence, &len);
    if (!request_reserve(req, attn_tokenize_bytes(len), at->name, pb))
        return false;
    struct attn_error err;
    const attn_status st =
        attn_tokenize(text, len, &opts, lim->max_tokens, &in->tokens, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(pb, 422, at->pointer,
                           "%s has more than %zu tokens (--max-tokens)",
                           at->name, lim->max_tokens);
    if (st == ATTN_E_NOMEM)
        return problem_set(pb, 503, at->pointer, "out of memory");
    if (st != ATTN_OK)
        return bad_utf8(at, text, &err, pb);
    if (in->tokens.count == 0)
        return problem_set(pb, 422, at->pointer,
                           "%s has no tokens (it is empty or only "
                           "whitespace and control characters)",
                           at->name);
    return true;
}

/* "tokens": taken as given, one embedding per string. */
static bool read_tokens(struct request *req, struct request_input *in,
                        const cJSON *tokens, const struct jpath *at,
                        const struct request_limits *lim, struct problem *pb)
{
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
            return bad_utf8(&sub, t->valuestring, &err, pb);
        attn_tokens_free(&probe);
        bytes += strlen(t->valuestring) + 1;
    }
    const size_t count = given + extra;
    if (!request_reserve(req, count * sizeof(char *) + bytes, at->name, pb))
        return false;
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

static bool read_embeddings(struct request *req, struct request_input *in,
                            const cJSON *v, const struct jpath *at,
                            const struct request_limits *lim,
                            struct problem *pb)
{
    size_t dims[4];
    int rank;
    if (!jsonin_tensor(v, at, 0, lim->max_output, req->hold, &in->x, dims,
                       &rank, pb))
        return false;
    in->batched = rank == 3;
    in->batch = rank == 3 ? dims[0] : 1;
    in->n = rank == 3 ? dims[1] : dims[0];
    in->d = rank == 3 ? dims[2] : dims[1];
    if (in->n > lim->max_tokens)
        return problem_set(pb, 422, at->pointer,
                           "%s has %zu tokens; the limit is %zu "
                           "(--max-tokens)",
                           at->name, in->n, lim->max_tokens);
    if (in->d > lim->max_dim)
        return problem_set(pb, 422, at->pointer,
                           "%s rows have %zu numbers; the limit is %zu "
                           "(--max-dim)",
                           at->name, in->d, lim->max_dim);
    return true;
}

/* The tokens of a text input, embedded from the seed, d wide. */
static bool embed_text(const struct request *req, struct request_input *in,
                       size_t d, const struct jpath *at,
                       const struct request_limits *lim, struct problem *pb)
{
    in->batch = 1;
    in->n = in->tokens.count;
    in->d = d;
    size_t count;
    if (!size_mul(in->n, in->d, &count) || count > lim->max_output)
        return problem_set(pb, 422, at->pointer,
                           "%zu tokens of width %zu are more numbers than the "
                           "limit (%zu, --max-output)",
                           in->n, in->d, lim->max_output);
    /* the embeddings, and what drawing them lists of the tokens */
    const size_t bytes =
        count * sizeof *in->x + drawn_embed_tokens_scratch(in->n);
    if (!request_reserve((struct request *)req, bytes, at->name, pb))
        return false;
    in->x = malloc(count * sizeof *in->x);
    if (!in->x)
        return problem_set(pb, 503, at->pointer, "out of memory");
    drawn_embed_tokens(req->drawn, in->tokens.text, in->n, req->cfg.seed, in->d,
                       in->x);
    return true;
}

/* One of sentence / tokens / embeddings from obj into in; base is the
 * object's path (NULL: the body). */
static bool read_input(struct request *req, struct request_input *in,
                       const cJSON *obj, const struct jpath *base,
                       const char *what, const struct request_limits *lim,
                       struct problem *pb)
{
    static const char *const kinds[] = {"sentence", "tokens", "embeddings"};
    const cJSON *found[3];
    int n_found = 0, which = -1;
    for (int i = 0; i < 3; i++)
        if ((found[i] = cJSON_GetObjectItemCaseSensitive(obj, kinds[i]))) {
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
    /* static strings: the pointer outlives this call */
    static const char *const pointers[3][3] = {
        {"/sentence", "/tokens", "/embeddings"},
        {"/context/sentence", "/context/tokens", "/context/embeddings"},
        {"/value/sentence", "/value/tokens", "/value/embeddings"}};
    in->present = true;
    in->pointer = pointers[in == &req->input     ? 0
                           : in == &req->context ? 1
                                                 : 2][which];
    if (which == 2)
        return read_embeddings(req, in, found[2], &at, lim, pb);
    in->from_text = true;
    if (!(which == 0 ? read_sentence(req, in, found[0], &at, lim, pb)
                     : read_tokens(req, in, found[1], &at, lim, pb)))
        return false;
    /* a text context is embedded as wide as the input it is attended from */
    const size_t d = in != &req->input  ? req->input.d
                     : req->cfg.d_model ? req->cfg.d_model
                                        : REQUEST_TEXT_D_MODEL;
    return embed_text(req, in, d, &at, lim, pb);
}

/* One side input (the context, the value) for every sequence of a
 * batched input: repeat it, once the copies are known to fit
 * --max-output. */
static bool broadcast_side(struct request *req, struct request_input *c,
                           const char *what, const struct request_limits *lim,
                           struct problem *pb)
{
    const size_t batch = req->input.batch, one = c->n * c->d;
    size_t all;
    if (!size_mul(batch, one, &all) || all > lim->max_output)
        return problem_set(pb, 422, c->pointer,
                           "the %s repeated for %zu sequences holds "
                           "more than %zu numbers (--max-output)",
                           what, batch, lim->max_output);
    char reserve_what[48];
    snprintf(reserve_what, sizeof reserve_what, "the repeated %s", what);
    if (!request_reserve(req, all * sizeof(float), reserve_what, pb))
        return false;
    float *wide = malloc(all * sizeof *wide);
    if (!wide)
        return problem_set(pb, 503, c->pointer, "out of memory");
    for (size_t b = 0; b < batch; b++)
        memcpy(wide + b * one, c->x, one * sizeof *wide);
    free(c->x);
    c->x = wide;
    c->batch = batch;
    return true;
}

/* The side input `name` ("context", "value") of root into side, when
 * root has it: an object of one of the input's three forms, as many
 * sequences as the input or one for all. */
static bool read_side(struct request *req, const cJSON *root, const char *name,
                      struct request_input *side,
                      const struct request_limits *lim, struct problem *pb)
{
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!obj)
        return true;
    struct jpath at;
    jpath_root(&at, name);
    if (!cJSON_IsObject(obj))
        return problem_set(pb, 422, at.pointer,
                           "%s is %s; expected an object such as "
                           "{\"embeddings\": [[...]]}",
                           name, jsonin_kind(obj));
    const cJSON *k;
    cJSON_ArrayForEach(k, obj)
    {
        if (strcmp(k->string, "sentence") && strcmp(k->string, "tokens") &&
            strcmp(k->string, "embeddings")) {
            struct jpath bad;
            jpath_key(&bad, &at, k->string);
            return problem_set(pb, 422, bad.pointer,
                               "unknown field \"%.40s\" in %s; expected "
                               "\"sentence\", \"tokens\" or \"embeddings\"",
                               k->string, name);
        }
    }
    if (!read_input(req, side, obj, &at, name, lim, pb))
        return false;
    const struct request_input *x = &req->input;
    if (side->batched && x->batch != side->batch)
        return problem_set(pb, 422, side->pointer,
                           "%s has a batch of %zu; the input has %zu", name,
                           side->batch, x->batch);
    return side->batched || x->batch == 1 ||
           broadcast_side(req, side, name, lim, pb);
}

bool request_read_inputs(struct request *req, const cJSON *root,
                         const struct request_limits *lim, struct problem *pb)
{
    if (!read_input(req, &req->input, root, NULL, "the request", lim, pb))
        return false;
    const struct request_input *x = &req->input;
    if (!x->from_text && req->cfg.d_model && req->cfg.d_model != x->d)
        return problem_set(pb, 422, "/d_model",
                           "d_model (%zu) does not match the embeddings' "
                           "width (%zu)",
                           req->cfg.d_model, x->d);
    if (!read_side(req, root, "context", &req->context, lim, pb) ||
        !read_side(req, root, "value", &req->value, lim, pb))
        return false;
    const struct request_input *c = &req->context, *v = &req->value;
    if (v->present && !c->present)
        return problem_set(pb, 422, "/value",
                           "value needs a context: keys come from the "
                           "context, values from the value input");
    if (v->present && v->n != c->n)
        return problem_set(pb, 422, v->pointer,
                           "value has %zu rows; the context has %zu: one "
                           "value a key",
                           v->n, c->n);
    return true;
}
