/*
 * attend.h - run a validated request through the core: each kind's run,
 * reached through its operations (answer.h).
 */
#ifndef ATTND_ATTEND_H
#define ATTND_ATTEND_H

#include "drawn_cache.h"
#include "problem.h"
#include "request.h"

/*
 * Compute what req asks for (the PNG's weights included) with threads
 * threads; a raised *cancel (may be NULL) stops it between units of work.
 * Parameters drawn from the seed come from cache (NULL: drawn for this
 * request alone) and are leased by req until request_free().
 * On success the caller owns *res (attn_result_free()).
 */
bool attend_run(struct request *req, unsigned threads,
                const atomic_bool *cancel, struct drawn_cache *cache,
                struct attn_result *res, struct problem *pb);

/*
 * The same for a request on a loaded model (REQUEST_MODEL): the model's
 * forward pass as decoding planned it (req->model.plan, on one thread),
 * returning what req->model.run asks for. On success the caller owns
 * *res (xf_result_free()).
 */
bool attend_model_run(struct request *req, const atomic_bool *cancel,
                      struct xf_result *res, struct problem *pb);

#endif
