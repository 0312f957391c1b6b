/*
 * generate_request.h - a POST /generate request, decoded and checked: the
 * prompt's request on the model as /attention would take it (its
 * encoding, what "return" asks of the finished sequence), how many tokens
 * to make, how to choose them, and what stops them.
 */
#ifndef ATTND_GENERATE_REQUEST_H
#define ATTND_GENERATE_REQUEST_H

#include "request.h"
#include "sampling.h"

#include <cJSON.h>

#include <stdbool.h>
#include <stddef.h>

#define GENERATE_MAX_STOPS 4       /* stop strings */
#define GENERATE_MAX_STOP_BYTES 64 /* each */
#define GENERATE_MAX_NEW 4096      /* max_new_tokens, before the positions */
#define GENERATE_DEFAULT_NEW 16
#define GENERATE_DEFAULT_TOP 5 /* top_candidates */
#define GENERATE_MAX_TOP 20

struct generate_request {
    struct request req; /* the prompt on the model, as /attention's */
    size_t max_new;     /* 1 to what the positions and --max-tokens leave */
    struct xf_sampling sampling;
    size_t top_candidates; /* shown with each token, 0 to 20 */
    char stop[GENERATE_MAX_STOPS][GENERATE_MAX_STOP_BYTES + 1];
    size_t n_stop;
};

/*
 * Decode a JSON body of len bytes: {"model", "prompt", "max_new_tokens",
 * "temperature", "top_k", "top_p", "seed", "stop", "top_candidates",
 * "return", "logit_lens_k", "add_special_tokens", "precision"}. The
 * prompt is encoded against what lim allows; what the request holds is
 * reserved in hold. On failure fills pb (naming the field) and returns
 * false; generate_request_free() releases it either way.
 */
bool generate_parse(struct generate_request *g, const char *body, size_t len,
                    const struct request_limits *lim, struct budget_hold *hold,
                    struct problem *pb);
void generate_request_free(struct generate_request *g);

/* "stop": one string or up to GENERATE_MAX_STOPS, each of 1 to
 * GENERATE_MAX_STOP_BYTES bytes, into g (v NULL: none). */
bool generate_read_stop(struct generate_request *g, const cJSON *v,
                        struct problem *pb);

#endif
