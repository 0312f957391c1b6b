/*
 * attend_model.c - the compute step of a request on a loaded model: the
 * encoder's forward pass over the request's wordpieces, through the same
 * thread count and cancel flag as every other computation.
 */
#include "attend.h"
#include "models.h"

#include <string.h>

bool attend_model_run(struct request *req, const atomic_bool *cancel,
                      struct xf_result *res, struct problem *pb)
{
    memset(res, 0, sizeof *res);
    if (!req->compute) /* "return": [] asks for tokens and config only */
        return true;
    struct attn_error err;
    attn_status st = xf_forward(req->model.plan, cancel, res, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, "");
    // the attribution, from the activations kept at its position
    struct request_interventions *iv = &req->model.iv;
    if (iv->n_dla_target && res->resid) {
        st = xf_dla(&req->model.entry->model->xf, res, iv->dla_target,
                    iv->n_dla_target, &iv->dla_result, &err);
        if (st != ATTN_OK)
            return problem_from_core(pb, st, &err, "/dla_target");
    }
    return true;
}
