/*
 * request_fields.c - the table of request fields, the lookups and writers
 * that go by it (the readers are request_fields_read.c). A new scalar
 * option is one row here (and its use in the core); everything else about
 * it follows from the row.
 */
#include "request_fields.h"
#include "jsonin.h"
#include "jsonnum.h"
#include "models.h"
#include "family.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FIELD_ENUM rows store the core's enums through an int. */
static_assert(sizeof(attn_mode) == sizeof(int) &&
                  sizeof(attn_residual) == sizeof(int) &&
                  sizeof(attn_positional) == sizeof(int),
              "enum fields are stored as int");

#define STR_(x) #x
#define STR(x) STR_(x)
#define AT(member) offsetof(struct request, member)

/* ------------------------------------------------------ the enum names */

static const char *colormap_name(int i)
{
    static const enum heatmap_colormap maps[] = {HEATMAP_VIRIDIS, HEATMAP_MAGMA,
                                                 HEATMAP_GRAY};
    return i >= 0 && i < 3 ? heatmap_colormap_name(maps[i]) : NULL;
}

static const char *view_name(int i)
{
    static const char *const names[] = {"heads", "model", "rollout"};
    return i >= 0 && i < 3 ? names[i] : NULL;
}

static const char *special_name(int i)
{
    static const char *const names[] = {"show", "hide"};
    return i >= 0 && i < 2 ? names[i] : NULL;
}

static const char *pool_name(int i)
{
    static const char *const names[] = {"auto", "none", "max", "mean"};
    return i >= 0 && i < 4 ? names[i] : NULL;
}

static const char *probe_name(int i)
{
    static const char *const names[] = {"none", "induction"};
    return i >= 0 && i < 2 ? names[i] : NULL;
}

static const char *products_name(int i)
{
    static const char *const names[] = {"float32", "bfloat16"};
    return i >= 0 && i < 2 ? names[i] : NULL;
}

static const char *color_scale_name(int i)
{
    static const char *const names[] = {"shared", "tile"};
    return i >= 0 && i < 2 ? names[i] : NULL;
}

const char *request_field_models_name(enum request_field_models m)
{
    return m == MODELS_ALLOWED    ? "allowed"
           : m == MODELS_REQUIRED ? "required"
                                  : "refused";
}

bool request_returns_read(const cJSON *v, const char *example,
                          bool (*take)(struct request *req,
                                       const struct request_return *r,
                                       const struct jpath *at,
                                       struct problem *pb),
                          struct request *req, struct problem *pb)
{
    struct jpath at;
    jpath_root(&at, "return");
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, at.pointer,
                           "return is %s; expected an array of names such as "
                           "%s",
                           jsonin_kind(v), example);
    const char *names[24];
    assert(request_return_count <= sizeof names / sizeof names[0]);
    for (size_t i = 0; i < request_return_count; i++)
        names[i] = request_returns[i].name;
    size_t i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, v)
    {
        struct jpath sub;
        jpath_index(&sub, &at, i++);
        int which;
        if (!jsonin_enum(item, &sub, names, request_return_count, &which, pb) ||
            !take(req, &request_returns[which], &sub, pb))
            return false;
    }
    return true;
}

const char *request_mask_name(int kind)
{
    static const char *const names[] = {"none", "causal"};
    return kind >= 0 && kind < 2 ? names[kind] : NULL;
}

const char *request_mask_type_name(int type)
{
    static const char *const names[] = {"auto", "boolean", "additive"};
    return type >= 0 && type < 3 ? names[type] : NULL;
}

const char *request_mask_convention_name(int convention)
{
    static const char *const names[] = {"allow", "block"};
    return convention >= 0 && convention < 2 ? names[convention] : NULL;
}

/* --------------------------------------------------------- echo writers */

static bool echo_bool(struct buf *out, const char *name, bool v)
{
    return buf_append_member(out, name) &&
           buf_append_str(out, v ? "true" : "false");
}

/* ,"name":"text" for a text that needs no escapes (the server's own) */
static bool echo_name(struct buf *out, const char *name, const char *text)
{
    return buf_append_member(out, name) && buf_append_str(out, "\"") &&
           buf_append_str(out, text) && buf_append_str(out, "\"");
}

static bool echo_uint(struct buf *out, const char *name, uint64_t v)
{
    return buf_append_member(out, name) && buf_append_uint(out, v);
}

/* The resolved value at f->offset, by f->kind. */
static bool echo_scalar(struct buf *out, const struct request *req,
                        const struct request_field *f)
{
    const char *at = (const char *)req + f->offset;
    char num[JSONNUM_MAX];
    switch (f->kind) {
    case FIELD_SIZE:
        return echo_uint(out, f->name, *(const size_t *)(const void *)at);
    case FIELD_BOOL:
        return echo_bool(out, f->name, *(const bool *)(const void *)at);
    case FIELD_FLOAT:
        jsonnum_format(*(const float *)(const void *)at, 0, num);
        return buf_append_member(out, f->name) && buf_append_str(out, num);
    case FIELD_SEED:
        return echo_uint(out, f->name, *(const uint64_t *)(const void *)at);
    case FIELD_ENUM: {
        const char *name = f->value_name(*(const int *)(const void *)at);
        return echo_name(out, f->name, name ? name : "");
    }
    default: return false;
    }
}

/* A model's name and the sizes of its network; a decoder's family, that
 * it is causal (what a viewer needs to tell a cell no query may see from
 * a weight of 0), its KV heads, head size and window too, and when its
 * layers' windows differ (Gemma 2's and 3's sliding and global layers)
 * each layer's. */
static bool echo_model(struct buf *out, const struct request *req,
                       const struct request_field *f)
{
    const struct model *m = req->model.entry->model;
    const struct xf_model *b = &m->xf;
    bool ok =
        buf_printf(out,
                   ",\"%s\":\"%s\",\"layers\":%zu,\"heads\":%zu,"
                   "\"hidden\":%zu,\"intermediate\":%zu,"
                   "\"max_positions\":%zu,\"activation\":\"%s\","
                   "\"lowercase\":%s",
                   f->name, m->name, b->layers, b->heads, b->hidden,
                   b->intermediate, b->max_positions, xf_act_name(b->arch.act),
                   m->do_lower_case ? "true" : "false");
    if (!ok || !m->family->decoder)
        return ok;
    ok = buf_printf(out,
                    ",\"family\":\"%s\",\"causal\":true,\"kv_heads\":%zu,"
                    "\"head_dim\":%zu,\"sliding_window\":",
                    m->family->model_type, b->kv_heads, b->head_dim);
    const size_t window = model_widest_window(m);
    ok = ok && (window ? buf_printf(out, "%zu", window)
                       : buf_append_str(out, "null"));
    if (!ok || !window || model_window(m, XF_ALL_LAYERS))
        return ok;
    ok = buf_append_str(out, ",\"layer_windows\":[");
    for (size_t l = 0; ok && l < b->layers; l++) {
        const size_t w = model_window(m, l);
        ok = (!l || buf_append_str(out, ",")) &&
             (w ? buf_printf(out, "%zu", w) : buf_append_str(out, "null"));
    }
    return ok && buf_append_str(out, "]");
}

static bool echo_pair(struct buf *out, const struct request *req,
                      const struct request_field *f)
{
    return echo_bool(out, f->name, req->model.pair);
}

/* What was ablated, as applied; nothing when nothing was. */
static bool echo_ablate(struct buf *out, const struct request *req,
                        const struct request_field *f)
{
    if (!req->model.iv.n_ablate)
        return true;
    return buf_printf(out, ",\"%s\":", f->name) &&
           request_echo_ablate(out, req);
}

/* The attributed token ids, and the position; nothing without "dla". */
static bool echo_dla_target(struct buf *out, const struct request *req,
                            const struct request_field *f)
{
    const struct request_interventions *iv = &req->model.iv;
    if (!iv->n_dla_target)
        return true;
    if (iv->n_dla_target == 1)
        return buf_printf(out, ",\"%s\":%u", f->name,
                          (unsigned)iv->dla_target[0]);
    return buf_printf(out, ",\"%s\":[%u,%u]", f->name,
                      (unsigned)iv->dla_target[0], (unsigned)iv->dla_target[1]);
}

static bool echo_dla_position(struct buf *out, const struct request *req,
                              const struct request_field *f)
{
    if (!req->model.iv.n_dla_target)
        return true;
    return buf_printf(out, ",\"%s\":%zu", f->name, req->model.iv.dla_position);
}

static bool echo_layer(struct buf *out, const struct request *req,
                       const struct request_field *f)
{
    if (req->model.run.layer == XF_ALL_LAYERS)
        return buf_printf(out, ",\"%s\":\"all\"", f->name);
    return buf_printf(out, ",\"%s\":%zu", f->name, req->model.run.layer);
}

static bool basic(const struct request *req)
{
    return req->cfg.mode == ATTN_MODE_BASIC;
}

/* Projection options mean nothing in mode basic: echoed as false. */
static bool echo_bias(struct buf *out, const struct request *req,
                      const struct request_field *f)
{
    return echo_bool(out, f->name, !basic(req) && req->cfg.qkv_bias);
}

static bool echo_out_proj(struct buf *out, const struct request *req,
                          const struct request_field *f)
{
    return echo_bool(out, f->name, !basic(req) && !req->cfg.no_out_proj);
}

static bool echo_out_bias(struct buf *out, const struct request *req,
                          const struct request_field *f)
{
    return echo_bool(out, f->name,
                     !basic(req) && !req->cfg.no_out_proj && req->cfg.out_bias);
}

static bool echo_scale(struct buf *out, const struct request *req,
                       const struct request_field *f)
{
    char num[JSONNUM_MAX];
    jsonnum_format(attn_config_scale(&req->cfg), 0, num);
    return buf_append_member(out, f->name) && buf_append_str(out, num);
}

/* The mask's name, and an explicit mask's form. */
static bool echo_mask(struct buf *out, const struct request *req,
                      const struct request_field *f)
{
    return echo_name(out, f->name, req->mask_name) &&
           (!req->mask_form || echo_name(out, "mask_form", req->mask_form));
}

static bool echo_key_padding(struct buf *out, const struct request *req,
                             const struct request_field *f)
{
    return echo_bool(out, f->name, req->cfg.key_padding != NULL);
}

static bool echo_params(struct buf *out, const struct request *req,
                        const struct request_field *f)
{
    static const char *const sources[] = {"none", "seed", "given"};
    return echo_name(out, f->name,
                     sources[basic(req) ? PARAMS_NONE : req->params_source]);
}

static bool echo_precision(struct buf *out, const struct request *req,
                           const struct request_field *f)
{
    if (!req->precision)
        return echo_name(out, f->name, "shortest");
    return echo_uint(out, f->name, req->precision);
}

/* The config of random weights opens with the resolved shape. */
static bool echo_shape(struct buf *out, const struct request *req)
{
    const struct attn_config *c = &req->cfg;
    return buf_append_str(out, "{\"batch\":") &&
           buf_append_uint(out, c->batch) &&
           echo_uint(out, "tokens", c->n_query) &&
           (!c->cross || (echo_uint(out, "context_tokens", c->n_ctx) &&
                          echo_uint(out, "d_context", c->d_ctx))) &&
           (!c->value || echo_uint(out, "d_value", c->d_value)) &&
           /* the keys a row of weights has, when bias_k or the zero key
            * follow the context's */
           (c->n_keys == c->n_ctx || echo_uint(out, "keys", c->n_keys));
}

/* A model's, with its wordpieces' count. */
static bool echo_wordpieces(struct buf *out, const struct request *req)
{
    return buf_printf(out, "{\"tokens\":%zu", req->model.enc.count);
}

/* Whether the answer to req returns r: random weights return the core's
 * arrays when they compute, and the server's own. */
static bool returned_random(const struct request *req,
                            const struct request_return *r)
{
    if (r->want)
        return req->compute &&
               (req->cfg.want & ~req->cfg.want_internal & r->want);
    if (r->extra == REQUEST_WANT_PARAMS)
        return (req->extra & r->extra) && !basic(req);
    return (req->extra & r->extra) != 0;
}

static bool returned_model(const struct request *req,
                           const struct request_return *r)
{
    return (req->model.run.want & r->model_want) != 0;
}

/* What differs between the kinds of request in the config echo: how it
 * opens, the rows it leaves out (those of the other kind alone), and
 * what "return" lists. */
static const struct echo_kind {
    bool (*opening)(struct buf *out, const struct request *req);
    enum request_field_models left_out;
    bool (*returned)(const struct request *req, const struct request_return *r);
} echo_kinds[REQUEST_KINDS] = {
    [REQUEST_RANDOM] = {echo_shape, MODELS_REQUIRED, returned_random},
    [REQUEST_MODEL] = {echo_wordpieces, MODELS_REFUSED, returned_model},
};

static bool echo_return(struct buf *out, const struct request *req,
                        const struct request_field *f)
{
    if (!buf_append_member(out, f->name) || !buf_append_str(out, "["))
        return false;
    bool first = true;
    for (size_t i = 0; i < request_return_count; i++) {
        const struct request_return *r = &request_returns[i];
        if (!echo_kinds[req->kind].returned(req, r))
            continue;
        if (!buf_append_str(out, first ? "\"" : ",\"") ||
            !buf_append_str(out, r->name) || !buf_append_str(out, "\""))
            return false;
        first = false;
    }
    return buf_append_str(out, "]");
}

/* ------------------------------------------------------------ the table */

const struct request_return request_returns[] = {
    {"weights", ATTN_WANT_WEIGHTS, 0, XF_WANT_WEIGHTS},
    {"weights_before_dropout", ATTN_WANT_WEIGHTS_RAW, 0, 0},
    {"scores", ATTN_WANT_SCORES, 0, 0},
    {"q", ATTN_WANT_Q, 0, 0},
    {"k", ATTN_WANT_K, 0, 0},
    {"v", ATTN_WANT_V, 0, 0},
    {"heads_output", ATTN_WANT_HEADS, 0, 0},
    {"output", ATTN_WANT_OUTPUT, 0, 0},
    {"mean_weights", ATTN_WANT_MEAN_WEIGHTS, 0, XF_WANT_MEAN_WEIGHTS},
    {"head_stats", ATTN_WANT_HEAD_STATS, 0, XF_WANT_HEAD_STATS},
    {"value_weighted", ATTN_WANT_VALUE_WEIGHTED, 0, XF_WANT_VALUE_WEIGHTED},
    {"sparse_weights", ATTN_WANT_TOP_K, 0, XF_WANT_TOP_K},
    {"embeddings", 0, REQUEST_WANT_EMBEDDINGS, 0},
    {"params", 0, REQUEST_WANT_PARAMS, 0},
    /* a model's only */
    {"hidden_states", 0, 0, XF_WANT_HIDDEN},
    {"rollout", 0, 0, XF_WANT_ROLLOUT},
    {"flow", 0, 0, XF_WANT_FLOW},
    {"logit_lens", 0, 0, XF_WANT_LOGIT_LENS},
    {"dla", 0, 0, XF_WANT_ACTIVATIONS},
};
const size_t request_return_count =
    sizeof request_returns / sizeof request_returns[0];

const char *const request_texts[] = {
    "/sentence",   "/sentence_b",   "/context/sentence", "/value/sentence",
    "/dla_target", "/dla_target/*", NULL};

#define BODY FIELD_IN_BODY
#define BOTH (FIELD_IN_BODY | FIELD_IN_QUERY)
#define QUERY FIELD_IN_QUERY

/*
 * Every field, in the order of the OpenAPI document; the echo keeps this
 * order. Unset columns are zero: no offset (read by its step), no range,
 * no documented default (it follows from other fields), no echo.
 */
// clang-format off
const struct request_field request_fields[] = {
    {.name = "sentence", .pointer = "/sentence", .kind = FIELD_INPUT, .where = BOTH, .type = "string",
     .models = MODELS_ALLOWED},
    /* a loaded checkpoint (GET /models), and what only it takes */
    {.name = "model", .pointer = "/model", .kind = FIELD_MODEL, .where = BOTH, .type = "string",
     .models = MODELS_REQUIRED, .echo = echo_model},
    {.name = "sentence_b", .pointer = "/sentence_b", .kind = FIELD_MODEL, .where = BOTH, .type = "string",
     .models = MODELS_REQUIRED, .echo = echo_pair},
    /* "all" or a layer from 0 */
    {.name = "layer", .pointer = "/layer", .kind = FIELD_LAYER, .where = BOTH,
     .default_json = "\"all\"", .models = MODELS_REQUIRED, .echo = echo_layer},
    /* without the tokens a model's tokenizer adds ([CLS] and [SEP], a BOS) */
    {.name = "add_special_tokens", .pointer = "/add_special_tokens", .kind = FIELD_BOOL, .where = BOTH,
     .type = "boolean", .offset = AT(add_special_tokens), .default_json = "true", .models = MODELS_REQUIRED,
     .echo = echo_scalar},
    /* an input built without text: a random sequence repeated */
    {.name = "probe", .pointer = "/probe", .kind = FIELD_ENUM, .where = BOTH, .type = "string",
     .offset = AT(probe), .value_name = probe_name, .default_json = "\"none\"",
     .models = MODELS_REQUIRED, .echo = echo_scalar},
    {.name = "probe_length", .pointer = "/probe_length", .kind = FIELD_SIZE, .where = BOTH,
     .type = "integer", .offset = AT(probe_length), .min = 1, .max = XF_MAX_POSITIONS / 2,
     .limit = LIMIT_FIXED, .default_json = STR(REQUEST_PROBE_LENGTH), .models = MODELS_REQUIRED,
     .echo = echo_scalar},
    {.name = "probe_seed", .pointer = "/probe_seed", .kind = FIELD_SEED, .where = BOTH,
     .offset = AT(probe_seed), .default_json = "0", .models = MODELS_REQUIRED, .echo = echo_scalar},
    /* heads whose values are zeroed or averaged before W_O, in every
     * layer's pass (request_intervene.c) */
    {.name = "ablate", .pointer = "/ablate", .kind = FIELD_INTERVENE, .where = BODY, .type = "array",
     .models = MODELS_REQUIRED, .echo = echo_ablate},
    /* direct logit attribution ("dla" in return): the token, or the pair
     * whose logit difference, and the position */
    {.name = "dla_target", .pointer = "/dla_target", .kind = FIELD_INTERVENE, .where = BODY,
     .models = MODELS_REQUIRED, .echo = echo_dla_target},
    {.name = "dla_position", .pointer = "/dla_position", .kind = FIELD_INTERVENE, .where = BODY,
     .type = "integer", .models = MODELS_REQUIRED, .echo = echo_dla_position},
    /* the logit lens's tokens a layer and position */
    {.name = "logit_lens_k", .pointer = "/logit_lens_k", .kind = FIELD_SIZE, .where = BOTH,
     .type = "integer", .offset = AT(logit_lens_k), .min = 1, .max = XF_MAX_LENS_K, .limit = LIMIT_FIXED,
     .default_json = STR(REQUEST_LOGIT_LENS_K), .models = MODELS_REQUIRED, .echo = echo_scalar},
    /* bfloat16 weights met by bfloat16 activations, where the CPU can */
    {.name = "products", .pointer = "/products", .kind = FIELD_ENUM, .where = BOTH, .type = "string",
     .offset = AT(products), .value_name = products_name, .default_json = "\"float32\"",
     .models = MODELS_REQUIRED, .echo = echo_scalar},
    {.name = "tokens", .pointer = "/tokens", .kind = FIELD_INPUT, .where = BODY, .type = "array"},
    {.name = "embeddings", .pointer = "/embeddings", .kind = FIELD_INPUT, .where = BODY},
    {.name = "context", .pointer = "/context", .kind = FIELD_CONTEXT, .where = BOTH, .type = "object"},
    /* V's own rows beside the context's keys: nn.MultiheadAttention's
     * value when vdim differs from kdim */
    {.name = "value", .pointer = "/value", .kind = FIELD_CONTEXT, .where = BODY, .type = "object"},
    {.name = "mode", .pointer = "/mode", .kind = FIELD_ENUM, .where = BOTH, .type = "string",
     .offset = AT(cfg.mode), .value_name = attn_mode_name, .default_json = "\"projected\"", .echo = echo_scalar},
    {.name = "heads", .pointer = "/heads", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.heads), .min = 1, .limit = LIMIT_HEADS, .default_json = STR(ATTN_DEFAULT_HEADS), .echo = echo_scalar},
    {.name = "kv_heads", .pointer = "/kv_heads", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.kv_heads), .min = 1, .limit = LIMIT_HEADS, .echo = echo_scalar},
    {.name = "d_model", .pointer = "/d_model", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.d_model), .min = 1, .limit = LIMIT_DIM, .default_json = STR(REQUEST_TEXT_D_MODEL), .echo = echo_scalar},
    {.name = "d_k", .pointer = "/d_k", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.d_k), .min = 1, .limit = LIMIT_DIM, .echo = echo_scalar},
    {.name = "d_v", .pointer = "/d_v", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.d_v), .min = 1, .limit = LIMIT_DIM, .echo = echo_scalar},
    {.name = "d_out", .pointer = "/d_out", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.d_out), .min = 1, .limit = LIMIT_DIM, .echo = echo_scalar},
    {.name = "bias", .pointer = "/bias", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(bias), .default_json = "false", .echo = echo_bias},
    {.name = "out_proj", .pointer = "/out_proj", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(out_proj), .default_json = "true", .echo = echo_out_proj},
    {.name = "out_bias", .pointer = "/out_bias", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(out_bias), .echo = echo_out_bias},
    {.name = "scale", .pointer = "/scale", .kind = FIELD_FLOAT, .where = BOTH, .type = "number",
     .offset = AT(cfg.scale), .echo = echo_scale},
    {.name = "residual", .pointer = "/residual", .kind = FIELD_ENUM, .where = BOTH, .type = "string",
     .offset = AT(cfg.residual), .value_name = attn_residual_name, .default_json = "\"none\"", .echo = echo_scalar},
    /* "none", "causal", or an array (request_mask.c) */
    {.name = "mask", .pointer = "/mask", .kind = FIELD_MASK, .where = BOTH,
     .value_name = request_mask_name, .default_json = "\"none\"", .echo = echo_mask},
    {.name = "causal", .pointer = "/causal", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(cfg.causal), .default_json = "false", .echo = echo_scalar},
    /* as asked, and after an explicit mask the kind it was read as */
    {.name = "mask_type", .pointer = "/mask_type", .kind = FIELD_ENUM, .where = BODY, .type = "string",
     .offset = AT(mask_type), .value_name = request_mask_type_name, .default_json = "\"auto\"", .echo = echo_scalar},
    {.name = "mask_convention", .pointer = "/mask_convention", .kind = FIELD_ENUM, .where = BODY, .type = "string",
     .offset = AT(mask_convention), .value_name = request_mask_convention_name, .default_json = "\"allow\"",
     .echo = echo_scalar},
    {.name = "key_padding", .pointer = "/key_padding", .kind = FIELD_KEY_PADDING, .where = BODY, .type = "array",
     .echo = echo_key_padding},
    {.name = "add_zero_attn", .pointer = "/add_zero_attn", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(cfg.zero_attn), .default_json = "false", .echo = echo_scalar},
    {.name = "positional", .pointer = "/positional", .kind = FIELD_ENUM, .where = BOTH, .type = "string",
     .offset = AT(cfg.positional), .value_name = attn_positional_name, .default_json = "\"none\"", .echo = echo_scalar},
    /* a FIELD_FLOAT with max > min lies in [min, max) */
    {.name = "dropout", .pointer = "/dropout", .kind = FIELD_FLOAT, .where = BOTH, .type = "number",
     .offset = AT(cfg.dropout), .min = 0, .max = 1, .default_json = "0", .echo = echo_scalar},
    {.name = "seed", .pointer = "/seed", .kind = FIELD_SEED, .where = BOTH,
     .offset = AT(cfg.seed), .default_json = "0", .echo = echo_scalar},
    {.name = "lowercase", .pointer = "/lowercase", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(lowercase), .default_json = "true", .echo = echo_scalar},
    {.name = "special_tokens", .pointer = "/special_tokens", .kind = FIELD_BOOL, .where = BOTH, .type = "boolean",
     .offset = AT(special_tokens), .default_json = "false", .echo = echo_scalar},
    {.name = "params", .pointer = "/params", .kind = FIELD_PARAMS, .where = BODY, .type = "object",
     .echo = echo_params},
    {.name = "return", .pointer = "/return", .kind = FIELD_RETURN, .where = BOTH, .type = "array",
     .default_json = "[\"weights\"]", .models = MODELS_ALLOWED, .echo = echo_return},
    /* the keys sparse_weights keeps of each row */
    {.name = "sparse_k", .pointer = "/sparse_k", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(cfg.top_k), .min = 1, .max = ATTN_MAX_TOP_K, .limit = LIMIT_FIXED,
     .default_json = STR(REQUEST_TOP_K), .models = MODELS_ALLOWED, .echo = echo_scalar},
    {.name = "precision", .pointer = "/precision", .kind = FIELD_SIZE, .where = BOTH, .type = "integer",
     .offset = AT(precision), .min = 1, .max = 9, .models = MODELS_ALLOWED, .echo = echo_precision},
    /* the image, in the URL of a GET or a POST */
    {.name = "format", .pointer = "/format", .kind = FIELD_PNG, .where = QUERY, .type = "string",
     .value_name = image_format_name, .default_json = "\"json\"", .models = MODELS_ALLOWED},
    {.name = "head", .pointer = "/head", .kind = FIELD_PNG, .where = QUERY,
     .default_json = "\"all\"", .models = MODELS_ALLOWED},
    /* a model's image: one layer's heads, every layer x head, or the
     * rollout; by default the heads of "layer", every layer for "all" */
    {.name = "view", .pointer = "/view", .kind = FIELD_PNG, .where = QUERY, .type = "string",
     .value_name = view_name, .models = MODELS_REQUIRED},
    {.name = "batch", .pointer = "/batch", .kind = FIELD_PNG, .where = QUERY, .type = "integer",
     .default_json = "0"},
    {.name = "colormap", .pointer = "/colormap", .kind = FIELD_PNG, .where = QUERY, .type = "string",
     .value_name = colormap_name, .default_json = "\"viridis\"", .models = MODELS_ALLOWED},
    {.name = "cell", .pointer = "/cell", .kind = FIELD_PNG, .where = QUERY, .type = "integer",
     .min = 1, .max = 64, .models = MODELS_ALLOWED},
    {.name = "labels", .pointer = "/labels", .kind = FIELD_PNG, .where = QUERY, .type = "boolean",
     .default_json = "true", .models = MODELS_ALLOWED},
    /* a model's image without the [CLS] and [SEP] its tokenizer added */
    {.name = "special", .pointer = "/special", .kind = FIELD_PNG, .where = QUERY, .type = "string",
     .value_name = special_name, .default_json = "\"show\"", .models = MODELS_REQUIRED},
    /* one colour scale for every matrix of an image, or one per tile; by
     * default per tile in a model's view=model, shared elsewhere */
    {.name = "color_scale", .pointer = "/color_scale", .kind = FIELD_PNG, .where = QUERY, .type = "string",
     .value_name = color_scale_name, .models = MODELS_ALLOWED},
    /* a long input's image as blocks of weights (heatmap.h's pooling) */
    {.name = "pool", .pointer = "/pool", .kind = FIELD_PNG, .where = QUERY, .type = "string",
     .value_name = pool_name, .default_json = "\"auto\"", .models = MODELS_ALLOWED},
    {.name = "pool_size", .pointer = "/pool_size", .kind = FIELD_PNG, .where = QUERY, .type = "integer",
     .min = 1, .max = 32768 /* an image side */, .models = MODELS_ALLOWED},
};
// clang-format on
const size_t request_field_count =
    sizeof request_fields / sizeof request_fields[0];
static_assert(sizeof request_fields / sizeof request_fields[0] <=
                  REQUEST_FIELDS_MOST,
              "struct request marks given fields in 64 bits");

/* ------------------------------------------------------------- lookups */

/* The table's indices in the order of their names, for a binary search:
 * every body is looked up member by member. Built once. */
static uint8_t by_name[sizeof request_fields / sizeof request_fields[0]];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static int compare_names(const void *a, const void *b)
{
    return strcmp(request_fields[*(const uint8_t *)a].name,
                  request_fields[*(const uint8_t *)b].name);
}

static void sort_names(void)
{
    for (size_t i = 0; i < request_field_count; i++)
        by_name[i] = (uint8_t)i;
    qsort(by_name, request_field_count, sizeof by_name[0], compare_names);
}

const struct request_field *request_field_find(const char *name)
{
    pthread_once(&by_name_once, sort_names);
    size_t lo = 0, hi = request_field_count;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(name, request_fields[by_name[mid]].name);
        if (!c)
            return &request_fields[by_name[mid]];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

size_t request_field_index(const struct request_field *f)
{
    return (size_t)(f - request_fields);
}

bool request_field_given(const struct request *req,
                         const struct request_field *f)
{
    return (req->given >> request_field_index(f) & 1) != 0;
}

const char *request_pointer_of(const struct request *req,
                               const char *core_field)
{
    const struct request_field *f = request_field_find(core_field);
    if (f && f->kind != FIELD_PNG)
        return f->pointer;
    if (!strcmp(core_field, "x") || !strcmp(core_field, "n_query"))
        return req->input.pointer ? req->input.pointer : "";
    if (!strcmp(core_field, "context") || !strcmp(core_field, "n_ctx") ||
        !strcmp(core_field, "d_ctx"))
        return "/context";
    if (!strcmp(core_field, "value") || !strcmp(core_field, "d_value"))
        return "/value";
    if (!strcmp(core_field, "want"))
        return "/return";
    if (!strcmp(core_field, "bias_kv"))
        return "/params";
    struct attn_param_tensor tensors[ATTN_PARAM_COUNT];
    const size_t n =
        attn_params_layout(&req->cfg, ATTN_LAYOUT_ALL_BIASES, tensors);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(core_field, tensors[i].name))
            return "/params";
    return "";
}

size_t request_field_max(const struct request_field *f,
                         const struct request_limits *lim)
{
    switch (f->limit) {
    case LIMIT_HEADS: return lim->max_heads;
    case LIMIT_DIM: return lim->max_dim;
    case LIMIT_FIXED: break;
    }
    return f->max;
}

size_t request_field_enum_names(const struct request_field *f,
                                const char *names[8])
{
    size_t n = 0;
    while (n < 8 && f->value_name((int)n))
        names[n] = f->value_name((int)n), n++;
    return n;
}

/* ---------------------------------------------------------------- echo */

bool request_fields_echo(struct buf *out, const struct request *req)
{
    const struct echo_kind *k = &echo_kinds[req->kind];
    bool ok = k->opening(out, req);
    for (size_t i = 0; ok && i < request_field_count; i++)
        if (request_fields[i].echo && request_fields[i].models != k->left_out)
            ok = request_fields[i].echo(out, req, &request_fields[i]);
    return ok && buf_append_str(out, "}");
}

/* ----------------------------------------------------------- /config */

char *request_fields_document(const struct request_limits *lim, size_t *len)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    bool ok = buf_append_str(&b, "{\"fields\":[");
    for (size_t i = 0; ok && i < request_field_count; i++) {
        const struct request_field *f = &request_fields[i];
        ok = buf_printf(&b, "%s{\"name\":\"%s\",\"in\":[%s%s%s]", i ? "," : "",
                        f->name, f->where & FIELD_IN_BODY ? "\"body\"" : "",
                        f->where == BOTH ? "," : "",
                        f->where & FIELD_IN_QUERY ? "\"query\"" : "");
        if (ok && f->type)
            ok = buf_printf(&b, ",\"type\":\"%s\"", f->type);
        if (ok && (f->kind == FIELD_SIZE || (f->kind == FIELD_PNG && f->max)))
            ok = buf_printf(&b, ",\"minimum\":%zu,\"maximum\":%zu", f->min,
                            request_field_max(f, lim));
        if (ok && f->kind == FIELD_FLOAT && f->max > f->min)
            ok = buf_printf(&b, ",\"minimum\":%zu,\"exclusiveMaximum\":%zu",
                            f->min, f->max);
        if (ok && f->value_name) {
            const char *names[8];
            const size_t n = request_field_enum_names(f, names);
            ok = buf_append_str(&b, ",\"enum\":[");
            for (size_t k = 0; ok && k < n; k++)
                ok = buf_printf(&b, "%s\"%s\"", k ? "," : "", names[k]);
            ok = ok && buf_append_str(&b, "]");
        }
        if (ok && f->default_json)
            ok = buf_printf(&b, ",\"default\":%s", f->default_json);
        ok = ok && buf_printf(&b, ",\"with_model\":\"%s\"}",
                              request_field_models_name(f->models));
    }
    ok = ok && buf_printf(&b,
                          "],\"limits\":{\"max_tokens\":%zu,\"max_dim\":%zu,"
                          "\"max_heads\":%zu,\"max_output\":%zu}}\n",
                          lim->max_tokens, lim->max_dim, lim->max_heads,
                          lim->max_output);
    if (!ok) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, len);
}
