/*
 * attend.h - run a validated request through the core.
 */
#ifndef ATTND_ATTEND_H
#define ATTND_ATTEND_H

#include "problem.h"
#include "request.h"

/*
 * Compute what req asks for (the PNG's weights included) with threads
 * threads; a raised *cancel (may be NULL) stops it between units of work.
 * On success the caller owns *res (attn_result_free()); req may gain drawn
 * parameters, which stay owned by req.
 */
bool attend_run(struct request *req, unsigned threads,
                const atomic_bool *cancel, struct attn_result *res,
                struct problem *pb);

#endif
