/*
 * request_mask.c - which keys each query may see: "mask" ("none",
 * "causal", or booleans with true = may attend, [N][M] or [B][N][M]) and
 * "key_padding" (booleans with true = ignore the key, [M] or [B][M]).
 */
#include "jsonin.h"
#include "request_steps.h"

#include <stdint.h>

const char *request_mask_name(int kind)
{
    static const char *const names[] = {"none", "causal"};
    return kind >= 0 && kind < 2 ? names[kind] : NULL;
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
        c->causal = which == 1;
        req->mask_name = kinds[which];
        return true;
    }
    if (!cJSON_IsArray(v))
        return problem_set(pb, 422, at.pointer,
                           "mask is %s; expected \"none\", \"causal\" or "
                           "an array of booleans",
                           jsonin_kind(v));
    size_t dims[3];
    int rank;
    if (!jsonin_bool_tensor(v, &at, 0, SIZE_MAX / 4, req->hold, &req->mask,
                            dims, &rank, pb))
        return false;
    const size_t n = c->n_query, m = c->n_ctx, b = c->batch;
    const size_t rows = rank == 3 ? dims[1] : dims[0];
    const size_t cols = rank == 3 ? dims[2] : dims[1];
    if (rank == 3 && dims[0] != b)
        return problem_set(pb, 422, at.pointer,
                           "mask has a batch of %zu; the input has %zu",
                           dims[0], b);
    if (rows != n || cols != m)
        return problem_set(pb, 422, at.pointer,
                           "mask is %zu x %zu; expected %zu x %zu (query "
                           "tokens x %s tokens)",
                           rows, cols, n, m, c->cross ? "context" : "key");
    c->mask = req->mask;
    c->mask_batched = rank == 3;
    req->mask_name = "explicit";
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
    size_t dims[3];
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
