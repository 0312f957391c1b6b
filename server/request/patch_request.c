/*
 * patch_request.c - decoding a POST /patch body (patch_request.h).
 */
#include "patch_request.h"
#include "family.h"
#include "jsonin.h"
#include "models.h"
#include "request_fields.h"
#include "request_intervene.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fields[] = {
    "model", "clean",     "corrupted",          "metric",
    "over",  "direction", "add_special_tokens", "precision"};

/* The texts a tokenizer reads: the two inputs and the metric's tokens
 * given by their text. */
static const char *const texts[] = {"/clean",          "/corrupted",
                                    "/metric/correct", "/metric/incorrect",
                                    "/metric/target",  NULL};

static bool check_keys(const cJSON *root, struct problem *pb)
{
    const cJSON *key;
    cJSON_ArrayForEach(key, root)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
            known = known || !strcmp(key->string, fields[i]);
        if (!known) {
            char pointer[80];
            snprintf(pointer, sizeof pointer, "/%.70s", key->string);
            return problem_set(pb, 422, pointer,
                               "unknown field \"%.60s\" (a patch takes model, "
                               "clean, corrupted, metric, over, direction, "
                               "add_special_tokens and precision)",
                               key->string);
        }
    }
    return true;
}

static bool read_model(struct patch_request *p, const cJSON *v,
                       const struct request_limits *lim, struct problem *pb)
{
    if (!cJSON_IsString(v))
        return problem_set(pb, 422, "/model",
                           "model is %s; expected the name of a loaded decoder "
                           "(GET /models)",
                           v ? jsonin_kind(v) : "missing");
    p->entry = models_find(lim->models, v->valuestring, strlen(v->valuestring));
    if (!p->entry) {
        char loaded[256];
        models_names(lim->models, loaded, sizeof loaded);
        return problem_set(pb, 422, "/model",
                           "model \"%.64s\" is not loaded; loaded: %s",
                           v->valuestring, loaded);
    }
    const struct model *m = p->entry->model;
    if (!m->xf.lm_head.data || m->xf.arch.norm_place == XF_NORM_AFTER)
        return problem_set(pb, 422, "/model",
                           "the model \"%s\" (%s) has %s: patching measures "
                           "the next-token scores of a decoder whose "
                           "residual stream no norm rewrites",
                           m->name, m->family->network,
                           m->xf.lm_head.data ? "its norms after each sublayer"
                                              : "no output head");
    return true;
}

/* One text into the model's tokens, within the positions and the limit. */
static bool encode_text(const cJSON *root, const char *name,
                        const struct model *m, const struct request_limits *lim,
                        bool special, struct budget_hold *hold,
                        struct tok_encoding *enc, struct problem *pb)
{
    char pointer[16];
    snprintf(pointer, sizeof pointer, "/%s", name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!cJSON_IsString(v))
        return problem_set(pb, 422, pointer, "%s is %s; expected a text", name,
                           v ? jsonin_kind(v) : "missing");
    size_t len;
    const char *text = jsonin_text(v, &len);
    if (hold && !budget_reserve(hold, tok_encode_bytes(&m->tokenizer, len, 0),
                                name, false, pb))
        return false;
    const size_t cap = m->xf.max_positions < lim->max_tokens
                           ? m->xf.max_positions
                           : lim->max_tokens;
    const struct tok_options opts = {.max_tokens = cap, .no_special = !special};
    struct attn_error err;
    const attn_status st =
        tok_encode(&m->tokenizer, text, len, NULL, 0, &opts, enc, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(pb, 422, pointer,
                           "%s is more than %zu tokens of the model \"%s\" "
                           "(%s)",
                           name, cap, m->name,
                           cap == m->xf.max_positions
                               ? "max_position_embeddings"
                               : "--max-tokens");
    if (st == ATTN_E_NOMEM)
        return problem_set(pb, 503, pointer, "out of memory");
    if (st != ATTN_OK)
        return problem_set(pb, 422, pointer, "%s: %s", name, err.message);
    if (!enc->count)
        return problem_set(pb, 422, pointer, "%s gives no tokens", name);
    return true;
}

static bool read_metric(struct patch_request *p, const cJSON *v,
                        const struct model *m, struct problem *pb)
{
    struct jpath at;
    jpath_root(&at, "metric");
    if (!cJSON_IsObject(v))
        return problem_set(pb, 422, at.pointer,
                           "metric is %s; expected {\"kind\": \"logit_diff\", "
                           "\"correct\": T, \"incorrect\": T} or {\"kind\": "
                           "\"logprob\", \"target\": T}, each T a token's "
                           "text or id",
                           v ? jsonin_kind(v) : "missing");
    struct jpath sub;
    jpath_key(&sub, &at, "kind");
    static const char *const kinds[] = {"logit_diff", "logprob"};
    int kind;
    if (!jsonin_enum(cJSON_GetObjectItemCaseSensitive(v, "kind"), &sub, kinds,
                     2, &kind, pb))
        return false;
    static const char *const keys[2][2] = {{"correct", "incorrect"},
                                           {"target", NULL}};
    const cJSON *k;
    cJSON_ArrayForEach(k, v)
    {
        const bool ok = !strcmp(k->string, "kind") ||
                        !strcmp(k->string, keys[kind][0]) ||
                        (keys[kind][1] && !strcmp(k->string, keys[kind][1]));
        if (!ok) {
            jpath_key(&sub, &at, k->string);
            return problem_set(
                pb, 422, sub.pointer,
                "%s is not a key of a %s metric (it takes %s%s%s)", sub.name,
                kinds[kind], keys[kind][0], keys[kind][1] ? " and " : "",
                keys[kind][1] ? keys[kind][1] : "");
        }
    }
    p->patch.metric.kind = kind ? XF_METRIC_LOGPROB : XF_METRIC_LOGIT_DIFF;
    uint32_t *ids[2] = {&p->patch.metric.correct, &p->patch.metric.incorrect};
    for (int i = 0; i < 2 && keys[kind][i]; i++) {
        jpath_key(&sub, &at, keys[kind][i]);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, keys[kind][i]);
        if (!t)
            return problem_set(pb, 422, sub.pointer,
                               "%s is missing: a token's text or id", sub.name);
        if (!request_read_token(t, &sub, m, ids[i], pb))
            return false;
    }
    return true;
}

static bool read_choice(const cJSON *root, const char *name,
                        const char *const *names, size_t n, int *out,
                        struct problem *pb)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = 0;
    if (!v)
        return true;
    struct jpath at;
    jpath_root(&at, name);
    return jsonin_enum(v, &at, names, n, out, pb);
}

/* The image's query parameters, and the Accept header's wish. */
static bool read_params(struct patch_request *p, const struct patch_param *q,
                        size_t n, enum image_format accepted,
                        struct problem *pb)
{
    p->format = accepted;
    p->labels = true;
    for (size_t i = 0; i < n; i++) {
        const char *k = q[i].key, *v = q[i].value ? q[i].value : "";
        if (!strcmp(k, "format")) {
            if (!image_format_parse(v, "", &p->format, pb)) /* names bare */
                return false;
        } else if (!strcmp(k, "cell")) {
            char *end;
            const long c = strtol(v, &end, 10);
            if (!*v || *end || c < 1 || c > 64)
                return problem_set(pb, 422, "/cell",
                                   "cell (\"%.40s\") must be 1 to 64 pixels",
                                   v);
            p->cell = (unsigned)c;
        } else if (!strcmp(k, "labels")) {
            if (!request_bool_from_text(v, &p->labels))
                return problem_set(pb, 422, "/labels",
                                   "labels (\"%.40s\") must be true or false",
                                   v);
        } else {
            return problem_set(pb, 422, "",
                               "query parameter \"%.60s\" is not taken by "
                               "/patch (format, cell and labels are)",
                               k);
        }
    }
    return true;
}

/* The work, counted before any of it is done. */
static bool cost(struct patch_request *p, const struct request_limits *lim,
                 struct budget_hold *hold, struct problem *pb)
{
    const struct model *m = p->entry->model;
    struct attn_error err;
    const attn_status st =
        xf_patch_cost(&m->xf, &p->patch, &p->bytes, &p->flops, &err);
    if (st == ATTN_E_TOO_BIG)
        return problem_set(pb, 422, "/over", "%s", err.message);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "");
    p->runs = xf_patch_runs(&m->xf, &p->patch);
    if (lim->max_flops && p->flops > (double)lim->max_flops) {
        problem_set(pb, 422, "/over",
                    "patching %s of the model \"%s\" is %zu runs of %zu "
                    "tokens, about %.3g GFLOP; the limit is %.3g GFLOP "
                    "(--max-flops): patch fewer places (heads rather than "
                    "heads_positions) or shorter texts",
                    xf_patch_over_name((int)p->patch.over), m->name, p->runs,
                    p->patch.n, p->flops * 1e-9, (double)lim->max_flops * 1e-9);
        pb->reason = "compute_budget";
        return false;
    }
    if (p->runs > lim->max_output)
        return problem_set(pb, 422, "/over",
                           "%zu effects are more than %zu numbers "
                           "(--max-output)",
                           p->runs, lim->max_output);
    return !hold || budget_reserve(hold, p->bytes, "the patch", false, pb);
}

bool patch_parse(struct patch_request *p, const char *body, size_t len,
                 const struct patch_param *params, size_t n_params,
                 enum image_format accepted, const struct request_limits *lim,
                 struct budget_hold *hold, struct problem *pb)
{
    memset(p, 0, sizeof *p);
    if (!read_params(p, params, n_params, accepted, pb))
        return false;
    cJSON *root = jsonin_parse_body(body, len, texts, pb);
    if (!root)
        return false;
    bool ok = cJSON_IsObject(root) ||
              problem_set(pb, 422, "", "the body is %s; expected an object",
                          jsonin_kind(root));
    ok =
        ok && check_keys(root, pb) &&
        read_model(p, cJSON_GetObjectItemCaseSensitive(root, "model"), lim, pb);
    const struct model *m = ok ? p->entry->model : NULL;
    p->add_special_tokens = true;
    const cJSON *special =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "add_special_tokens")
           : NULL;
    if (ok && special) {
        struct jpath at;
        jpath_root(&at, "add_special_tokens");
        ok = jsonin_bool(special, &at, &p->add_special_tokens, pb);
    }
    const cJSON *precision =
        ok ? cJSON_GetObjectItemCaseSensitive(root, "precision") : NULL;
    if (ok && precision) {
        struct jpath at;
        jpath_root(&at, "precision");
        ok = jsonin_size(precision, &at, 1, 9, &p->precision, pb);
    }
    ok = ok &&
         encode_text(root, "clean", m, lim, p->add_special_tokens, hold,
                     &p->clean, pb) &&
         encode_text(root, "corrupted", m, lim, p->add_special_tokens, hold,
                     &p->corrupted, pb);
    if (ok && p->clean.count != p->corrupted.count)
        ok = problem_set(pb, 422, "/corrupted",
                         "clean is %zu tokens and corrupted %zu: patching "
                         "swaps activations position by position, so the "
                         "two must be the same length",
                         p->clean.count, p->corrupted.count);
    static const char *const overs[] = {"heads", "heads_positions", "residual",
                                        "layers"};
    static const char *const directions[] = {"denoise", "noise"};
    int over = 0, direction = 0;
    ok = ok &&
         read_metric(p, cJSON_GetObjectItemCaseSensitive(root, "metric"), m,
                     pb) &&
         read_choice(root, "over", overs, 4, &over, pb) &&
         read_choice(root, "direction", directions, 2, &direction, pb);
    if (ok) {
        p->patch.clean = p->clean.ids;
        p->patch.corrupted = p->corrupted.ids;
        p->patch.n = p->clean.count;
        p->patch.over = (xf_patch_over)over;
        p->patch.noise = direction == 1;
        p->patch.threads = 1;
        p->patch.batch_rows = PATCH_BATCH_ROWS;
    }
    ok = ok && cost(p, lim, hold, pb);
    cJSON_Delete(root);
    return ok;
}

void patch_request_free(struct patch_request *p)
{
    tok_encoding_free(&p->clean);
    tok_encoding_free(&p->corrupted);
    memset(p, 0, sizeof *p);
}
