/*
 * attend.c - the compute step of a request: draw the parameters the
 * client wants to see, then call attn_forward() on the config the request
 * resolved.
 */
#include "attend.h"

#include <string.h>

bool attend_run(struct request *req, unsigned threads,
                const atomic_bool *cancel, struct attn_result *res,
                struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    memset(res, 0, sizeof *res);
    /* Parameters the client wants back are drawn here and then passed in,
     * so the response shows exactly the values that were used. */
    if ((req->extra & REQUEST_WANT_PARAMS) &&
        req->params_source == PARAMS_SEED && c->mode == ATTN_MODE_PROJECTED) {
        struct attn_error err;
        const attn_status st = attn_params_draw(c, &req->params, &err);
        if (st != ATTN_OK)
            return problem_from_core(pb, st, &err, "");
        c->params = &req->params;
    }
    c->threads = threads;
    c->cancel = cancel;
    if (!req->compute) /* "return": [] asks for tokens and config only */
        return true;   /* an empty result: no arrays, no warnings */
    struct attn_error err;
    const attn_status st = attn_forward(
        c, req->input.x, c->cross ? req->context.x : NULL, res, &err);
    if (st != ATTN_OK)
        return problem_from_core(pb, st, &err,
                                 request_pointer_of(req, err.field));
    return true;
}
