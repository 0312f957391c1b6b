/*
 * answer.h - from a decoded request to its answer, one path for every
 * kind of request. Decoding records what a request runs on (req->kind:
 * the random weights of a seed, or a loaded checkpoint); answer_ops()
 * gives that kind's operations once, and every stage after decoding goes
 * through them: plan (the image measured, the work and the memory the
 * answer will take), run (the core), then the JSON or the PNG.
 */
#ifndef ATTND_ANSWER_H
#define ATTND_ANSWER_H

#include "tokenizer.h"
#include "transformer.h"
#include "buf.h"
#include "drawn_cache.h"
#include "problem.h"
#include "request.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct response_stream;

/* What answering a decoded request will take, known before anything is
 * computed. */
struct answer_plan {
    double flops;        /* estimated work; 0 when nothing is computed */
    size_t run_bytes;    /* at most what the computation holds; 0 when
                            nothing is computed */
    size_t answer_bytes; /* at most what the image, or the JSON stream,
                            holds */
};

/* The result of a run: the core's for the random weights, the encoder's
 * for a model; kind says which member holds it. Zeroed is empty. */
struct answer_result {
    enum request_kind kind;
    union {
        struct attn_result attn; /* REQUEST_RANDOM */
        struct xf_result xf;     /* REQUEST_MODEL */
    };
};

/* One kind's operations, in the order a request meets them. */
struct answer_ops {
    const char *name; /* "random" or "model" */
    /*
     * Measure the image the decoded req asks for (req->png.width and
     * height, under RENDER_MAX_PIXELS), and fill *plan. An image the
     * drawing would refuse is refused here with the drawing's problem
     * (422 at "/cell" naming the size and the cap; a model's special=hide
     * with nothing left to draw, 422 at "/special"), so that nothing is
     * computed for it.
     */
    bool (*plan)(struct request *req, struct answer_plan *plan,
                 struct problem *pb);
    /*
     * Compute what req asks for (the image's weights included) with
     * threads threads; a raised *cancel (may be NULL) stops it between
     * units of work. Parameters drawn from the seed come from cache (NULL:
     * drawn for this request alone). On success the caller owns *res
     * (answer_result_free()).
     */
    bool (*run)(struct request *req, unsigned threads,
                const atomic_bool *cancel, struct drawn_cache *cache,
                struct answer_result *res, struct problem *pb);
    /* A stream over the JSON body of req and res, which it borrows
     * (response.h); NULL when memory runs out. */
    struct response_stream *(*encode_json)(const struct request *req,
                                           const struct answer_result *res);
    /* The image of req and res under max_pixels, in req->png.format
     * (PNG or SVG); on success *png (malloc'd, free()) holds *len bytes
     * (render.h). */
    bool (*draw_png)(const struct request *req, const struct answer_result *res,
                     size_t max_pixels, unsigned char **png, size_t *len,
                     struct problem *pb);
    void (*result_free)(struct answer_result *res);
    /* Append to text what else a cached GET answer depends on beside its
     * URL: a model's checkpoint. */
    bool (*tag)(const struct request *req, struct buf *text);
    /* The kind's own counters of an answered request of flops work: a
     * model's requests and work (/metrics). */
    void (*count)(const struct request *req, double flops);
};

/* The operations of kind. */
const struct answer_ops *answer_ops(enum request_kind kind);

/* Release what res holds, by its kind; res is left empty. */
void answer_result_free(struct answer_result *res);

#endif
