/*
 * request_steps.h - the steps of decoding a request, one file each, in
 * the order request.c runs them. Internal to the request modules.
 */
#ifndef ATTND_REQUEST_STEPS_H
#define ATTND_REQUEST_STEPS_H

#include "request.h"

#include <cJSON.h>

/* request.c: a JSON object, from a body or from GET parameters, into req. */
bool request_decode(struct request *req, const cJSON *root,
                    const struct request_limits *lim, struct problem *pb);

/* Reserve bytes on the request's budget hold, if it has one, before
 * allocating them for what; 422 or 503 in pb when they do not fit. */
static inline bool request_reserve(struct request *req, size_t bytes,
                                   const char *what, struct problem *pb)
{
    return !req->hold || budget_reserve(req->hold, bytes, what, false, pb);
}

/* request_input.c: "sentence", "tokens" or "embeddings", and "context";
 * a context of one sequence is repeated for every sequence of the input. */
bool request_read_inputs(struct request *req, const cJSON *root,
                         const struct request_limits *lim, struct problem *pb);

/* request_mask.c: "mask" and "key_padding", checked against the shapes
 * already in req->cfg. */
bool request_read_masks(struct request *req, const cJSON *root,
                        struct problem *pb);

/* request_mask.c: once the config is resolved, with its heads: a mask of
 * one matrix per sequence and head ([B*heads][N][M] or
 * [B][heads][N][M]) has one for each of them. */
bool request_mask_heads(struct request *req, size_t heads, struct problem *pb);

/* request_params.c: "params", a PyTorch state_dict, checked against the
 * resolved config. */
bool request_read_params(struct request *req, const cJSON *v,
                         struct problem *pb);

/* request_params.c: whether "params" has add_bias_kv's bias_k or bias_v,
 * which give every sequence one more key; known before the config is
 * resolved, so that its sizes count it. */
bool request_params_bias_kv(const cJSON *params);

/* request_model.c: a request on the loaded model that name (the value of
 * "model") names: its fields, encoding, layer, returns, image and
 * budgets. */
bool request_decode_model(struct request *req, const cJSON *root,
                          const cJSON *name, const struct request_limits *lim,
                          struct problem *pb);

/* request_model.c: no field that only a model takes was sent without
 * one (in the body, or among the URL's PNG options marked given). */
bool request_check_without_model(const struct request *req,
                                 struct problem *pb);

#endif
