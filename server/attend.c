/*
 * attend.c - the compute step of a request: settle what the core must
 * return, draw parameters the client wants to see, call attn_forward().
 */
#include "attend.h"

#include <string.h>

bool attend_run(struct request *req, unsigned threads, struct attn_result *res,
                struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    memset(res, 0, sizeof *res);
    if (req->png.wanted)
        c->want = req->png.head_kind == HEAD_MEAN ? ATTN_WANT_MEAN_WEIGHTS
                                                  : ATTN_WANT_WEIGHTS;
    /* Parameters the client wants back are drawn here and then passed in,
     * so the response shows exactly the values that were used. */
    if ((req->extra & REQUEST_WANT_PARAMS) && !req->explicit_params &&
        c->mode == ATTN_MODE_PROJECTED && !c->params) {
        struct attn_error err;
        const attn_status st = attn_params_draw(c, &req->params, &err);
        if (st != ATTN_OK)
            return problem_from_core(pb, st, &err, NULL, 0);
        c->params = &req->params;
    }
    c->threads = threads;
    if (c->want == 0) /* "return": [] asks for tokens and config only */
        return true;  /* an empty result: no arrays, no warnings */
    const struct problem_field fields[] = {
        {"x", req->input.pointer},
        {"context", req->context.pointer ? req->context.pointer : "/context"},
        {"q_proj.weight", "/params"},
        {"k_proj.weight", "/params"},
        {"v_proj.weight", "/params"},
        {"out_proj.weight", "/params"},
        {"q_proj.bias", "/params"},
        {"k_proj.bias", "/params"},
        {"v_proj.bias", "/params"},
        {"out_proj.bias", "/params"},
        {"return", "/return"},
    };
    struct attn_error err;
    const attn_status st = attn_forward(
        c, req->input.x, c->cross ? req->context.x : NULL, res, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err, fields,
                                 sizeof fields / sizeof fields[0]);
    return true;
}
