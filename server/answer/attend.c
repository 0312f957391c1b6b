/*
 * attend.c - the compute step of a request: draw the parameters the
 * client wants to see, then call attn_forward() on the config the request
 * resolved.
 */
#include "attend.h"

#include <string.h>

bool attend_run(struct request *req, unsigned threads,
                const atomic_bool *cancel, struct drawn_cache *cache,
                struct attn_result *res, struct problem *pb)
{
    struct attn_config *c = &req->cfg;
    memset(res, 0, sizeof *res);
    /* Parameters drawn from the seed come from the cache (or are drawn
     * now) and are passed in, so that a response that shows them shows
     * exactly the values that were used. A response that does not show
     * them gets only those its pass reads (the weights alone read W_q and
     * W_k): the others are never looked at, so params_checked holds. */
    if (req->params_source == PARAMS_SEED && c->mode == ATTN_MODE_PROJECTED &&
        (req->compute || (req->extra & REQUEST_WANT_PARAMS))) {
        struct attn_error err = {0};
        const unsigned slots = (req->extra & REQUEST_WANT_PARAMS)
                                   ? DRAWN_ALL_SLOTS
                                   : drawn_params_needed(c);
        if (!drawn_params_lease_some(cache, c, slots, &req->params,
                                     &req->params_lease, &err))
            return problem_from_core(pb, ATTN_E_NOMEM, &err, "");
        c->params = &req->params;
        c->params_checked = true; /* drawn: every value finite */
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
