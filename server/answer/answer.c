/*
 * answer.c - the kinds of request as rows of one table: each row names its
 * kind's plan, run, JSON and image, reached through answer_ops() rather
 * than through a test of the request at every stage. The random weights'
 * parts are attend.c, render.c and response.c's assemble(); a model's are
 * attend_model.c, render_model.c and response.c's assemble_model().
 */
#include "answer.h"
#include "attend.h"
#include "models.h"
#include "render.h"
#include "response.h"

#include <assert.h>
#include <string.h>

/* ------------------------------------------------------ random weights */

static bool plan_random(struct request *req, struct answer_plan *plan,
                        struct problem *pb)
{
    const bool image = req->png.format != IMAGE_JSON;
    if (image && !render_png_measure(req, pb))
        return false;
    if (!image && !response_measures_fit(req, pb))
        return false;
    plan->flops = req->compute ? attn_flops(&req->cfg) : 0;
    plan->run_bytes = req->compute ? attn_forward_bytes(&req->cfg) : 0;
    plan->answer_bytes =
        image ? render_png_bytes(req) : response_stream_bytes(req);
    return true;
}

static bool run_random(struct request *req, unsigned threads,
                       const atomic_bool *cancel, struct drawn_cache *cache,
                       struct answer_result *res, struct problem *pb)
{
    res->kind = REQUEST_RANDOM;
    return attend_run(req, threads, cancel, cache, &res->attn, pb);
}

static struct response_stream *json_random(const struct request *req,
                                           const struct answer_result *res)
{
    return response_stream_new(req, &res->attn);
}

static bool png_random(const struct request *req,
                       const struct answer_result *res, size_t max_pixels,
                       unsigned char **png, size_t *len, struct problem *pb)
{
    return render_png(req, &res->attn, max_pixels, png, len, pb);
}

static void free_random(struct answer_result *res)
{
    attn_result_free(&res->attn);
}

/* The answer is the URL's alone. */
static bool tag_random(const struct request *req, struct buf *text)
{
    (void)req;
    (void)text;
    return true;
}

/* No counters of its own: the server's count every request. */
static void count_random(const struct request *req, double flops)
{
    (void)req;
    (void)flops;
}

/* ------------------------------------------------------------ a model */

static bool plan_model(struct request *req, struct answer_plan *plan,
                       struct problem *pb)
{
    const bool image = req->png.format != IMAGE_JSON;
    if (image && !render_model_png_measure(req, pb))
        return false;
    // the lens is text, which an answer holds whole
    if (!image && (req->model.run.want & XF_WANT_LOGIT_LENS) &&
        response_lens_bytes(req) == SIZE_MAX)
        return problem_set(pb, 422, "/logit_lens_k",
                           "the logit lens of %zu layers x %zu tokens x %zu "
                           "would be more than %zu MiB of JSON: a shorter "
                           "input or a smaller logit_lens_k",
                           req->model.entry->model->xf.layers, req->model.run.n,
                           req->logit_lens_k, response_text_cap() >> 20);
    if (!image && !response_measures_fit(req, pb))
        return false;
    // the pass itself was planned while decoding, for its budget
    plan->flops = req->compute ? xf_plan_flops(req->model.plan) : 0;
    plan->run_bytes = req->compute ? xf_plan_bytes(req->model.plan) : 0;
    plan->answer_bytes =
        image ? render_model_png_bytes(req) : response_stream_bytes_model(req);
    return true;
}

static bool run_model(struct request *req, unsigned threads,
                      const atomic_bool *cancel, struct drawn_cache *cache,
                      struct answer_result *res, struct problem *pb)
{
    (void)cache; /* a checkpoint draws nothing */
    res->kind = REQUEST_MODEL;
    (void)threads; /* the plan's: one, as for every request (workers.h) */
    return attend_model_run(req, cancel, &res->xf, pb);
}

static struct response_stream *json_model(const struct request *req,
                                          const struct answer_result *res)
{
    return response_stream_new_model(req, &res->xf);
}

static bool png_model(const struct request *req,
                      const struct answer_result *res, size_t max_pixels,
                      unsigned char **png, size_t *len, struct problem *pb)
{
    return render_model_png(req, &res->xf, max_pixels, png, len, pb);
}

static void free_model(struct answer_result *res)
{
    xf_result_free(&res->xf);
}

/* The answer changes with the checkpoint, not with the URL. */
static bool tag_model(const struct request *req, struct buf *text)
{
    return buf_printf(text, "m%016llx",
                      (unsigned long long)req->model.entry->fingerprint);
}

static void count_model(const struct request *req, double flops)
{
    models_count(req->model.entry, flops);
}

/* ------------------------------------------------------------ the table */

static const struct answer_ops kinds[REQUEST_KINDS] = {
    [REQUEST_RANDOM] = {.name = "random",
                        .plan = plan_random,
                        .run = run_random,
                        .encode_json = json_random,
                        .draw_png = png_random,
                        .result_free = free_random,
                        .tag = tag_random,
                        .count = count_random},
    [REQUEST_MODEL] = {.name = "model",
                       .plan = plan_model,
                       .run = run_model,
                       .encode_json = json_model,
                       .draw_png = png_model,
                       .result_free = free_model,
                       .tag = tag_model,
                       .count = count_model},
};

const struct answer_ops *answer_ops(enum request_kind kind)
{
    assert((size_t)kind < REQUEST_KINDS); /* set by decoding */
    return &kinds[kind];
}

void answer_result_free(struct answer_result *res)
{
    answer_ops(res->kind)->result_free(res);
    memset(res, 0, sizeof *res);
}
