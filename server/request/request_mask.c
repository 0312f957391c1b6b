/*
 * request_mask.c - which keys each query may see: "mask" ("none",
 * "causal", or an array: booleans, or numbers added to the scores, as
 * "mask_type" and "mask_convention" say; [N][M], [B][N][M], PyTorch's
 * per-head [B x heads][N][M], or [B][heads][N][M]) and "key_padding"
 * (booleans with true = ignore the key, [M] or [B][M]).
 */
#include "jsonin.h"
#include "request_fields.h"
#include "request_steps.h"

#include <stdint.h>
#include <stdlib.h>

/* Which of the four forms the shape is, into the config, as far as the
 * shape tells before the config is resolved: [N][M], [B][N][M], or one
 * matrix per sequence and head, whose count request_mask_heads() checks
 * against the resolved heads. */
static bool mask_form(struct request *req, const struct jsonin_mask *m,
                      const struct jpath *at, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    const size_t n = c->n_query, mm = c->n_ctx, b = c->batch;
    const size_t *d = m->dims;
    const char *keys = c->cross ? "context" : "key";
    const size_t rows = d[m->rank - 2], cols = d[m->rank - 1];
    if (rows != n || cols != mm)
        return problem_set(pb, 422, at->pointer,
                           "mask's last two dimensions are %zu x %zu; "
                           "expected %zu x %zu (query tokens x %s tokens)",
                           rows, cols, n, mm, keys);
    if (m->rank == 2) {
        req->mask_form = "[N][M]";
        return true;
    }
    if (m->rank == 3 && d[0] == b) {
        c->mask_batched = true;
        req->mask_form = "[B][N][M]";
        return true;
    }
    /* [B*heads][N][M] or [B][heads][N][M]: counted once heads are known */
    c->mask_per_head = true;
    req->mask_rank = m->rank;
    for (int k = 0; k < m->rank; k++)
        req->mask_dims[k] = d[k];
    return true;
}

bool request_mask_heads(struct request *req, size_t heads, struct problem *pb)
{
    const struct attn_config *c = &req->cfg;
    if (!c->mask_per_head)
        return true;
    const size_t n = c->n_query, mm = c->n_ctx, b = c->batch;
    const size_t *d = req->mask_dims;
    if (req->mask_rank == 3) {
        if (d[0] == b * heads) {
            req->mask_form = "[B*heads][N][M]";
            return true;
        }
        return problem_set(pb, 422, "/mask",
                           "mask has %zu matrices; expected one per sequence "
                           "([B][N][M], B = %zu) or one per sequence and head "
                           "([B*heads][N][M], %zu x %zu = %zu)",
                           d[0], b, b, heads, b * heads);
    }
    if (d[0] != b || d[1] != heads)
        return problem_set(pb, 422, "/mask",
                           "mask is %zu x %zu x %zu x %zu; expected [B][heads]"
                           "[N][M] = %zu x %zu x %zu x %zu",
                           d[0], d[1], d[2], d[3], b, heads, n, mm);
    req->mask_form = "[B][heads][N][M]";
    return true;
}

/* Boolean or additive, by mask_type and the leaves read. */
static bool mask_kind(struct request *req, const struct jsonin_mask *m,
                      const struct jpath *at, bool *additive,
                      struct problem *pb)
{
    struct jpath where;
    switch ((enum request_mask_type)req->mask_type) {
    case MASK_BOOLEAN:
        if (m->first_other != SIZE_MAX) {
            jsonin_pointer_at(at, m->dims, m->rank, m->first_other, &where);
            return problem_set(pb, 422, where.pointer,
                               "%s (%.9g) is neither 0 nor 1; mask_type "
                               "\"boolean\" takes true, false, 1 or 0",
                               where.name, (double)m->values[m->first_other]);
        }
        *additive = false;
        return true;
    case MASK_ADDITIVE:
        if (m->first_bool != SIZE_MAX) {
            jsonin_pointer_at(at, m->dims, m->rank, m->first_bool, &where);
            return problem_set(pb, 422, where.pointer,
                               "%s is a boolean; mask_type \"additive\" takes "
                               "numbers and \"-inf\"",
                               where.name);
        }
        *additive = true;
        return true;
    case MASK_AUTO: break;
    }
    if (m->first_other == SIZE_MAX) {
        *additive = false;
        return true;
    }
    if (m->first_bool != SIZE_MAX) {
        jsonin_pointer_at(at, m->dims, m->rank, m->first_bool, &where);
        return problem_set(pb, 422, where.pointer,
                           "%s is a boolean, but the mask also has numbers "
                           "other than 0 and 1, which make it additive; send "
                           "one kind",
                           where.name);
    }
    *additive = true;
    return true;
}

static bool read_mask(struct request *req, const cJSON *v, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    struct jpath at;
    jpath_root(&at, "mask");
    if (cJSON_IsString(v)) {
        const char *kinds[] = {request_mask_name(0), request_mask_name(1)};
        int which;
        if (!jsonin_enum(v, &at, kinds, 2, &which, pb))
            return false;
        c->causal = c->causal || which == 1; /* "causal": true stays */
        req->mask_name = kinds[which];
        return true;
    }
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, at.pointer,
                           "mask is %s; expected \"none\", \"causal\" or "
                           "an array of booleans or numbers",
                           jsonin_kind(v));
    struct jsonin_mask m;
    if (!jsonin_mask_tensor(v, &at, SIZE_MAX / 8, req->hold, &m, pb))
        return false;
    bool additive = false;
    if (!mask_form(req, &m, &at, pb) ||
        !mask_kind(req, &m, &at, &additive, pb)) {
        free(m.values);
        return false;
    }
    req->mask_name = "explicit";
    req->mask_type = additive ? MASK_ADDITIVE : MASK_BOOLEAN;
    if (additive) {
        req->mask_bias = m.values;
        c->mask_bias = req->mask_bias;
        return true;
    }
    /* "block" is nn.MultiheadAttention's attn_mask: true = masked */
    const uint8_t allowed_when = req->mask_convention == MASK_BLOCK ? 0 : 1;
    if (!request_reserve(req, m.count, at.name, pb)) {
        free(m.values);
        return false;
    }
    req->mask = malloc(m.count);
    if (!req->mask) {
        free(m.values);
        return problem_set(pb, 503, at.pointer, "out of memory reading mask");
    }
    for (size_t e = 0; e < m.count; e++)
        req->mask[e] = (uint8_t)((m.values[e] != 0.0f) == allowed_when);
    free(m.values);
    c->mask = req->mask;
    return true;
}

static bool read_key_padding(struct request *req, const cJSON *v,
                             struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    struct jpath at;
    jpath_root(&at, "key_padding");
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, at.pointer,
                           "key_padding is %s; expected an array of "
                           "booleans (true = ignore the key)",
                           jsonin_kind(v));
    size_t dims[4];
    int rank;
    const int want_rank = cJSON_IsArray(v->child) ? 2 : 1;
    if (!jsonin_bool_tensor(v, &at, want_rank, SIZE_MAX / 4, req->hold,
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
    return true;
}

bool request_read_masks(struct request *req, const cJSON *root,
                        struct problem *pb)
{
    const cJSON *mask = cJSON_GetObjectItemCaseSensitive(root, "mask");
    const cJSON *padding =
        cJSON_GetObjectItemCaseSensitive(root, "key_padding");
    return (!mask || read_mask(req, mask, pb)) &&
           (!padding || read_key_padding(req, padding, pb));
}
