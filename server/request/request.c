/*
 * request.c - the life of a request and the order of its decoding.
 *
 * Order matters: options first (text inputs need seed, d_model and the
 * tokenizer options), then inputs, then what depends on their shapes
 * (masks), then the core's resolution of the config, once, for what the
 * answer will hold (a mask of a matrix per head is counted against the
 * heads it resolves), and last the parameters, which are checked against
 * the resolved sizes. So every refusal points at the field the client
 * wrote.
 */
#include "request.h"
#include "jsonin.h"
#include "request_fields.h"
#include "request_steps.h"

#include <stdlib.h>
#include <string.h>

void request_init(struct request *req)
{
    memset(req, 0, sizeof *req);
    /* the defaults request_fields.c documents; zero elsewhere */
    req->lowercase = true;
    req->add_special_tokens = true;
    req->logit_lens_k = REQUEST_LOGIT_LENS_K;
    req->probe_length = REQUEST_PROBE_LENGTH;
    req->cfg.top_k = REQUEST_TOP_K;
    req->out_proj = true;
    req->compute = true;
    req->mask_name = "none";
    req->params_source = PARAMS_SEED;
    req->png.labels = true;
    req->png.head_kind = HEAD_ALL;
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
    input_free(&req->value);
    tok_encoding_free(&req->model.enc);
    free(req->model.plan);
    free(req->model.pool_at);
    request_interventions_free(&req->model.iv);
    if (req->params_lease.n_held || req->params_lease.n_own)
        drawn_lease_end(&req->params_lease); /* the drawn parameters */
    else
        attn_params_free(&req->params);
    free(req->mask);
    free(req->mask_bias);
    free(req->key_padding);
    memset(req, 0, sizeof *req);
}

static bool given(const struct request *req, const char *name)
{
    const struct request_field *f = request_field_find(name);
    return f && request_field_given(req, f);
}

/* ------------------------------------------------------------ options */

/* Every member of root is a body field; marks each in req->in_body. */
static bool check_known_fields(struct request *req, const cJSON *root,
                               struct problem *pb)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        const struct request_field *f = request_field_find(item->string);
        if (!f || !(f->where & FIELD_IN_BODY)) {
            struct jpath at;
            jpath_root(&at, item->string);
            return problem_set(pb, 422, at.pointer, "unknown field \"%.60s\"",
                               item->string);
        }
        req->in_body |= (uint64_t)1 << request_field_index(f);
    }
    return true;
}

/* One name of "return" without a model. */
static bool take_return(struct request *req, const struct request_return *r,
                        const struct jpath *at, struct problem *pb)
{
    if (!r->want && !r->extra)
        return problem_set(pb, 422, at->pointer,
                           "%s (\"%s\") is returned only with \"model\", "
                           "a loaded checkpoint (GET /models)",
                           at->name, r->name);
    req->cfg.want |= r->want;
    req->extra |= r->extra;
    return true;
}

static bool read_return(struct request *req, const cJSON *v, struct problem *pb)
{
    req->cfg.want = 0;
    req->extra = 0;
    if (!request_returns_read(v, "[\"weights\", \"output\"]", take_return, req,
                              pb))
        return false;
    /* the core reads "nothing" as "the output"; the client meant it */
    req->compute = req->cfg.want != 0;
    return true;
}

/* The options, into the config's terms. */
static bool read_options(struct request *req, const cJSON *root,
                         const struct request_limits *lim, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    c->want = ATTN_WANT_WEIGHTS;
    if (!request_fields_read(req, root, lim, pb))
        return false;
    c->no_out_proj = !req->out_proj;
    c->qkv_bias = req->bias;
    /* out_bias alone: ViT's qkv_bias=False with a biased projection */
    c->out_bias = given(req, "out_bias") ? req->out_bias : req->bias;
    c->has_scale = given(req, "scale");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "return");
    return !v || read_return(req, v, pb);
}

/* -------------------------------------------------------- resolution */

/* What the answer holds decides what the config is resolved for. */
static bool resolve(struct request *req, const struct request_limits *lim,
                    struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    if (req->png.format != IMAGE_JSON) {
        c->want = req->png.head_kind == HEAD_MEAN ? ATTN_WANT_MEAN_WEIGHTS
                                                  : ATTN_WANT_WEIGHTS;
        req->compute = true;
    }
    c->max_elements = lim->max_output;
    struct attn_error err;
    const attn_status st = attn_config_resolve(c, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err,
                                 request_pointer_of(req, err.field));
    if (!request_mask_heads(req, c->heads, pb))
        return false;
    /* the compute budget, before any work */
    const double flops = attn_flops(c);
    if (req->compute && lim->max_flops && flops > (double)lim->max_flops) {
        problem_set(pb, 422, "",
                    "the request needs about %.3g GFLOP; the limit is %.3g "
                    "GFLOP (--max-flops): fewer tokens, heads or a narrower "
                    "d_model",
                    flops * 1e-9, (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        return false;
    }
    return true;
}

/* The arrays the server adds to the core's: embeddings and parameters. */
static bool check_extra_size(const struct request *req,
                             const struct request_limits *lim,
                             struct problem *pb)
{
    const struct attn_config *c = &req->cfg;
    size_t extra = 0;
    if (req->extra & REQUEST_WANT_EMBEDDINGS)
        extra += c->batch * (c->n_query * c->d_model +
                             (c->cross ? c->n_ctx * c->d_ctx : 0));
    if (req->extra & REQUEST_WANT_PARAMS) {
        struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
        const size_t n = attn_params_layout(c, ATTN_LAYOUT_ALL_BIASES, tensors);
        for (size_t i = 0; i < n; i++)
            extra += attn_param_count(&tensors[i]);
    }
    if (extra > lim->max_output)
        return problem_set(pb, 422, "/return",
                           "the requested arrays hold more than %zu numbers "
                           "(--max-output)",
                           lim->max_output);
    return true;
}

/* The image's sequence and head exist in the resolved config. (Whether
 * it can be drawn is known once it is measured, when the answer is
 * planned.) */
static bool check_png(const struct request *req, struct problem *pb)
{
    const struct request_png *png = &req->png;
    const struct attn_config *c = &req->cfg;
    if (png->format == IMAGE_JSON)
        return true;
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

bool request_decode(struct request *req, const cJSON *root,
                    const struct request_limits *lim, struct problem *pb)
{
    if (!cJSON_IsObject(root))
        return problem_set(pb, 422, "",
                           "the body is %s; expected a JSON object",
                           jsonin_kind(root));
    if (!check_known_fields(req, root, pb))
        return false;
    /* the request's kind, decided here once */
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    req->kind = model ? REQUEST_MODEL : REQUEST_RANDOM;
    if (model)
        return request_decode_model(req, root, model, lim, pb);
    if (!request_check_without_model(req, pb) ||
        !read_options(req, root, lim, pb) ||
        !request_read_inputs(req, root, lim, pb))
        return false;
    struct attn_config *c = &req->cfg;
    c->batch = req->input.batch;
    c->n_query = req->input.n;
    c->d_model = req->input.d;
    c->cross = req->context.present;
    c->n_ctx = c->cross ? req->context.n : c->n_query;
    c->d_ctx = c->cross ? req->context.d : c->d_model;
    c->value = req->value.present ? req->value.x : NULL;
    c->d_value = req->value.present ? req->value.d : 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "params");
    c->bias_kv = c->mode == ATTN_MODE_PROJECTED && request_params_bias_kv(v);
    if (!request_read_masks(req, root, pb) || !resolve(req, lim, pb))
        return false;
    if (v && !request_read_params(req, v, pb))
        return false;
    return check_extra_size(req, lim, pb) && check_png(req, pb);
}

bool request_parse_json(struct request *req, const char *body, size_t len,
                        const struct request_limits *lim, struct problem *pb)
{
    cJSON *root = jsonin_parse_body(body, len, request_texts, pb);
    if (!root)
        return false;
    const bool ok = request_decode(req, root, lim, pb);
    cJSON_Delete(root);
    return ok;
}
