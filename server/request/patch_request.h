/*
 * patch_request.h - a POST /patch request, decoded and checked: the model,
 * the clean and corrupted texts in its tokens (the same count), the
 * metric and its tokens, what is patched and which way, and what it all
 * costs, before anything is computed (src/patching.h does the work).
 */
#ifndef ATTND_PATCH_REQUEST_H
#define ATTND_PATCH_REQUEST_H

#include "budget.h"
#include "patching.h"
#include "problem.h"
#include "request.h"

#include <stdbool.h>
#include <stddef.h>

/* Rows of a batch of patched runs. The streamed product reads each
 * weight once per 64 rows, so past a few sequences a larger batch saves
 * no reads: 256, 512 and 1024 rows patch equally fast on a 1B model
 * (docs/benchmarks.md), and 256 hold half the memory of 512. */
#define PATCH_BATCH_ROWS 256

struct patch_request {
    struct models_entry *entry;       /* borrowed from the server */
    struct tok_encoding clean, corrupted; /* owned: the model's tokens */
    struct xf_patch patch;            /* its ids point into the two */
    bool add_special_tokens;
    size_t precision; /* significant digits; 0: shortest round-trip */
    enum image_format format; /* JSON, or the effects drawn */
    unsigned cell;    /* an image's pixels a cell; 0: automatic */
    bool labels;
    size_t runs;      /* patched runs */
    size_t bytes;     /* what the patch holds at most (xf_patch_cost) */
    double flops;     /* its work */
};

/* One of the query parameters /patch takes: format, cell, labels. */
struct patch_param {
    const char *key, *value;
};

/*
 * Decode a JSON body of len bytes: {"model", "clean", "corrupted",
 * "metric", "over", "direction", "add_special_tokens", "precision"}, and
 * the image's query parameters; accepted: the format the Accept header
 * asked for (image_format_accepted()), which format= decides over. Both
 * texts are encoded and held to lim; the work is held to lim->max_flops;
 * what the request holds is reserved in hold. On failure fills pb (naming
 * the field) and returns false; patch_request_free() releases it either
 * way.
 */
bool patch_parse(struct patch_request *p, const char *body, size_t len,
                 const struct patch_param *params, size_t n_params,
                 enum image_format accepted, const struct request_limits *lim,
                 struct budget_hold *hold, struct problem *pb);
void patch_request_free(struct patch_request *p);

#endif
